// Runs against a live `fleetmem serve` (tests/clients/test_typescript_client.py starts one on
// 127.0.0.1 and passes FLEETMEM_URL, FLEETMEM_TOKEN (read,write) and FLEETMEM_READ_TOKEN (read)).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { createFleetmemClient, FleetmemError } from "../src/index.js";

function env(name: string): string {
  const value = process.env[name];
  assert.ok(value, `${name} is not set`);
  return value;
}

const baseUrl = env("FLEETMEM_URL");
const writer = createFleetmemClient({ baseUrl, token: env("FLEETMEM_TOKEN") });
const reader = createFleetmemClient({ baseUrl, token: env("FLEETMEM_READ_TOKEN") });

async function refusal(call: Promise<unknown>): Promise<FleetmemError> {
  try {
    await call;
  } catch (err) {
    assert.ok(err instanceof FleetmemError, `expected a FleetmemError, got ${String(err)}`);
    return err;
  }
  assert.fail("the call was not refused");
}

test("remember then recall finds the fact", async () => {
  const marker = `zebra-${randomUUID().slice(0, 8)}`;
  const saved = await writer.call("remember", {
    fact: `Globex prefers the ${marker} invoicing format`,
    provenance: "typescript client test",
    entity: "Globex",
  });
  assert.ok("id" in saved && typeof saved.id === "string" && saved.id.length > 0);
  const found = await reader.call("recall", { query: marker });
  assert.ok(
    found.facts.some((f) => f.fact_id === saved.id && f.fact.includes(marker)),
    `recall did not return ${saved.id}`,
  );
});

test("entity answers the card of a remembered entity", async () => {
  await writer.call("remember", {
    fact: "Initech renewed for two years",
    provenance: "typescript client test",
    entity: "Initech",
  });
  const answer = await reader.call("entity", { name: "Initech" });
  assert.ok("card" in answer && answer.card, "entity answered no card");
  assert.equal(answer.found, true);
  assert.match(answer.card.entity.slug, /initech/);
  assert.ok(answer.card.active_fact_count >= 1);
});

test("a read token's remember is refused with scope_denied and a fix", async () => {
  const err = await refusal(reader.call("remember", { fact: "should not be saved", provenance: "typescript client test" }));
  assert.equal(err.code, "scope_denied");
  assert.equal(err.status, 403);
  assert.ok(err.fix, "the envelope carries a fix");
  assert.equal(err.fix.actor, "host_admin");
  assert.ok(err.suggestion);
  assert.ok(err.correlation_id);
  assert.equal(err.envelope?.correlation_id, err.correlation_id);
  assert.ok(!JSON.stringify(err.envelope).includes(env("FLEETMEM_READ_TOKEN")), "the token is not echoed");
});

test("a bad parameter is refused with invalid_params", async () => {
  // @ts-expect-error limit is an integer: the generated types refuse this call too.
  const err = await refusal(reader.call("recall", { query: "anything", limit: "many" }));
  assert.equal(err.code, "invalid_params");
  assert.equal(err.status, 400);
  assert.ok(err.fix);
  assert.ok(err.correlation_id);
});

test("tools lists what the credential may call", async () => {
  const { tools } = await reader.tools();
  const names = tools.map((t) => t.name);
  assert.ok(names.includes("recall"));
  assert.ok(!names.includes("remember"), "a read token is not offered remember");
});
