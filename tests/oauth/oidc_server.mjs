// An OAuth 2.1 / OpenID authorization server for the suite: panva's oidc-provider (OpenID
// certified), in Cognito's place (Cognito's hosted endpoints cannot run here). Started by
// tests/oauth/authorization_server.py on 127.0.0.1 on the port it is given, it prints one line
// `READY <issuer>` once it listens and serves until it is killed.
//
// Configured as a stage's authorization server is: authorization code + PKCE (S256 only, always
// required), refresh tokens (to a client registered for them), revocation, dynamic registration, and resource
// indicators (RFC 8707) whose access tokens are RS256 JWTs with `aud` = the requested resource and
// the scopes `read write admin`. devInteractions is the login and consent form: any login name is
// accepted as the person's `sub`, so a test completes the authorize step over plain HTTP.
import { generateKeyPairSync } from 'node:crypto';
import Provider from 'oidc-provider';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  console.error('usage: node oidc_server.mjs PORT');
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;
const RESOURCE_SCOPES = 'read write admin';

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'suite-rs256', use: 'sig', alg: 'RS256' };

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  scopes: ['openid', 'offline_access', 'read', 'write', 'admin'],
  claims: { openid: ['sub'] },
  findAccount: (ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  responseTypes: ['code'],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // a request naming no resource gets no JWT for any; one naming a resource gets its audience
      defaultResource: (ctx, client, oneOf) => (oneOf ? oneOf[0] : undefined),
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resourceIndicator) => ({
        scope: RESOURCE_SCOPES,
        audience: resourceIndicator,
        accessTokenTTL: 300,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
  // a client registered for the refresh_token grant gets a refresh token with its code, as Cognito
  // gives one: MCP clients ask for the scopes the stage's 401 names, never OpenID's offline_access
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  ttl: { AccessToken: 300, AuthorizationCode: 60, RefreshToken: 3600, Grant: 3600, Interaction: 600, Session: 3600 },
});
provider.proxy = false;

provider.listen(port, '127.0.0.1', () => {
  console.log(`READY ${issuer}`);
});
