// Save a fact, then find it again: node dist/examples/remember-recall.js
// FLEETMEM_URL defaults to the local server; FLEETMEM_TOKEN holds a read,write token.
import { createFleetmemClient, FleetmemError } from "../src/index.js";

const token = process.env.FLEETMEM_TOKEN;
if (!token) throw new Error("set FLEETMEM_TOKEN (fleetmem token create --client ts-example --scopes read,write)");
const fleetmem = createFleetmemClient({ baseUrl: process.env.FLEETMEM_URL ?? "http://127.0.0.1:8765", token });

try {
  const saved = await fleetmem.call("remember", {
    fact: "Acme renewal call is on 2026-07-02",
    provenance: "typescript example",
    entity: "Acme",
  });
  // remember answers a single save (`id`) or, given `items`, a batch.
  if ("id" in saved) console.log("saved", saved.id);
  const found = await fleetmem.call("recall", { query: "Acme renewal" });
  for (const fact of found.facts) console.log("recalled", fact.fact_id, fact.fact);
} catch (err) {
  if (!(err instanceof FleetmemError)) throw err;
  console.error(`${err.code}: ${err.message} (next: ${err.fix?.next}, correlation id ${err.correlation_id})`);
  process.exitCode = 1;
}
