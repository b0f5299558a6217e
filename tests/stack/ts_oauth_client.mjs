// A person's assistant built on the official MCP TypeScript SDK (@modelcontextprotocol/sdk), signing
// in to a stage with the SDK's own OAuth support: discovery from the stage's 401 (protected-resource
// metadata, then the authorization server's), dynamic registration, authorization code + PKCE with
// the resource indicator, token, calls, refresh. Driven by tests/stack/test_stack_oauth.py over
// stdin/stdout, one JSON object per line; only the person's browser is the test's (it reads the
// authorization URL printed here and answers with the redirect it ended in).
//
//   node ts_oauth_client.mjs MCP_URL REDIRECT_URI
//
// Lines out: {"authorize": url} (a browser is needed), {"whoami": result} after each call (the
// second also says whether the access token was renewed, the refresh token now held and the
// registered client id, so the test can revoke it), {"refused": error} when the browser came back without a code.
// Lines in: the redirect URL after an {"authorize"} line; "again" to call after a revocation.
import readline from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

const [mcpUrl, redirectUri] = process.argv.slice(2);
if (!mcpUrl || !redirectUri) {
  console.error('usage: node ts_oauth_client.mjs MCP_URL REDIRECT_URI');
  process.exit(2);
}

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);
const hear = async () => {
  const { value, done } = await lines.next();
  if (done) throw new Error('stdin closed');
  return value.trim();
};

// What the SDK asks a client application to keep: kept in memory, handed back unchanged.
class MemoryProvider {
  constructor() {
    this.kept = { tokens: undefined, client: undefined, verifier: undefined };
  }
  get redirectUrl() { return redirectUri; }
  get clientMetadata() {
    return {
      client_name: 'ts sdk assistant',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() { return this.kept.client; }
  saveClientInformation(info) { this.kept.client = info; }
  tokens() { return this.kept.tokens; }
  saveTokens(tokens) { this.kept.tokens = tokens; }
  saveCodeVerifier(verifier) { this.kept.verifier = verifier; }
  codeVerifier() { return this.kept.verifier; }
  redirectToAuthorization(url) { say({ authorize: url.toString() }); }
}

const provider = new MemoryProvider();

async function whoami() {
  const client = new Client({ name: 'ts-sdk-assistant', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
  try {
    await client.connect(transport);
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
    // The SDK printed the authorization URL (redirectToAuthorization); the browser answers.
    const landed = new URL(await hear());
    const code = landed.searchParams.get('code');
    if (!code) {
      say({ refused: landed.searchParams.get('error') || 'no code' });
      return null;
    }
    await transport.finishAuth(code);
    return whoami();
  }
  try {
    const result = await client.callTool({ name: 'whoami', arguments: {} });
    return result.structuredContent ?? JSON.parse(result.content[0].text);
  } finally {
    await client.close();
  }
}

async function main() {
  say({ whoami: await whoami() });
  const first = provider.kept.tokens;
  // The access token expires (made unusable here): the stage's 401 sends the SDK to refresh.
  provider.kept.tokens = { ...first, access_token: 'expired' };
  const renewed = await whoami();
  const now = provider.kept.tokens;
  say({
    whoami: renewed,
    renewed: now.access_token !== first.access_token,
    refresh_token: now.refresh_token ?? null,
    client_id: provider.kept.client?.client_id ?? null,
  });
  // The test revokes that refresh token at the authorization server, then says "again": the next
  // refresh is refused, and so is the call.
  await hear();
  provider.kept.tokens = { ...now, access_token: 'expired' };
  try {
    say({ whoami: await whoami() });
  } catch (err) {
    say({ refused: err?.name ?? String(err) });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    say({ failed: `${err?.name}: ${err?.message}` });
    process.exit(1);
  },
);
