// A real OpenID provider for the tests: the certified `oidc-provider` package, configured the way an
// MCP deployment needs its authorization server (RFC 7591 open Dynamic Client Registration, PKCE
// S256 required, RFC 8707 resource indicators issuing RFC 9068 JWT access tokens whose `aud` is the
// resource), with a fixed account store whose login and consent are plain HTML form posts.
//
//   node provider.mjs --port 4444 [--issuer http://127.0.0.1:4444] --resource http://127.0.0.1:8000/mcp
//                     [--resource <another accepted resource>] [--access-token-ttl 300] [--refreshed-token-ttl 300] [--alg RS256]
//                     [--signing <resource>=<alg> (a resource whose tokens another algorithm signs)]
//
// Environment: MAYA_OAUTH_CLIENT_ID / MAYA_OAUTH_CLIENT_SECRET / MAYA_OAUTH_REDIRECT_URIS (space
// separated) preconfigure the MCP server's own confidential client (authorization code + PKCE);
// OIDC_USERS (a JSON list of {sub, email, password, name, preferred_username, email_verified (default
// true), groups?}) replaces the two default accounts. Signing keys are made at every start, so a restart
// rotates them, unless OIDC_KEYS (a JSON list of private JWKs) gives them: a test that must sign a
// token with the issuer's own key (another `iss`, say) then holds it.
//
// The interaction pages are this script's own, not the package's devInteractions (which accept any
// name and password): GET /interaction/:uid shows a login form (fields `login`, `password`, posted to
// /interaction/:uid/login) or a consent form (posted to /interaction/:uid/confirm; /abort declines).
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';

import Provider, { errors } from 'oidc-provider';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string' },
    issuer: { type: 'string' },
    resource: { type: 'string', multiple: true },
    'access-token-ttl': { type: 'string', default: '300' },
    'refreshed-token-ttl': { type: 'string' },
    alg: { type: 'string', default: 'RS256' },
    signing: { type: 'string', multiple: true },
  },
});

const port = Number(args.port);
if (!Number.isInteger(port) || port <= 0) throw new Error('--port <number> is required');
if (!args.resource?.length) throw new Error('--resource <the MCP resource URL> is required');
const issuer = args.issuer ?? `http://127.0.0.1:${port}`;
// --signing <resource>=<alg> signs that resource's tokens with another algorithm than --alg.
const algs = new Map((args.signing ?? []).map((pair) => pair.split(/=(?=[^=]+$)/)));
const resources = new Set([...args.resource, ...algs.keys()]);
const accessTokenTTL = Number(args['access-token-ttl']);
// An access token got by the refresh_token grant may live longer, so a test can hold an expired first
// token and a fresh refreshed one at the same instant of the resource server's clock.
const refreshedTokenTTL = Number(args['refreshed-token-ttl'] ?? args['access-token-ttl']);
const RESOURCE_SCOPES = 'maya.read maya.change';

const DEFAULT_USERS = [
  { sub: 'admin', email: 'admin@door.test', password: 'admin-password', name: 'Ada Admin', preferred_username: 'admin' },
  { sub: 'member', email: 'member@door.test', password: 'member-password', name: 'Max Member', preferred_username: 'member' },
];
const users = process.env.OIDC_USERS ? JSON.parse(process.env.OIDC_USERS) : DEFAULT_USERS;

// One key per family (the RSA key serves RS256 and PS256); at the start, so a restart rotates them.
function signingKey(type, options) {
  const { privateKey } = generateKeyPairSync(type, options);
  return { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), use: 'sig' };
}

const keys = process.env.OIDC_KEYS
  ? JSON.parse(process.env.OIDC_KEYS)
  : [signingKey('rsa', { modulusLength: 2048 }), signingKey('ec', { namedCurve: 'P-256' }), signingKey('ed25519', {})];

const clients = [];
if (process.env.MAYA_OAUTH_CLIENT_ID) {
  clients.push({
    client_id: process.env.MAYA_OAUTH_CLIENT_ID,
    client_secret: process.env.MAYA_OAUTH_CLIENT_SECRET,
    client_name: 'maya-tools',
    redirect_uris: (process.env.MAYA_OAUTH_REDIRECT_URIS ?? '').split(/\s+/).filter(Boolean),
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  });
}

function account(sub) {
  return users.find((user) => user.sub === sub);
}

const provider = new Provider(issuer, {
  clients,
  jwks: { keys },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  // The MCP resource's scopes are listed too: a client registering by DCR names the scopes the
  // resource's metadata advertises, and the provider accepts only scopes it lists here.
  scopes: ['openid', 'offline_access', 'email', 'profile', ...RESOURCE_SCOPES.split(' ')],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username', 'groups'],
  },
  async findAccount(ctx, sub) {
    const user = account(sub);
    if (!user) return undefined;
    return {
      accountId: sub,
      async claims() {
        const groups = user.groups ? { groups: user.groups } : {};  // a team claim, as IdPs send one
        return {
          sub,
          email: user.email,
          email_verified: user.email_verified ?? true,
          name: user.name,
          preferred_username: user.preferred_username,
          ...groups,
        };
      },
    };
  },
  // A resource server names the person without calling userinfo, so the access token carries the
  // readable claims (as IdPs do when configured to).
  async extraTokenClaims(ctx, token) {
    if (token.kind !== 'AccessToken' || !token.accountId) return undefined;
    const user = account(token.accountId);
    if (!user) return undefined;
    const groups = user.groups ? { groups: user.groups } : {};
    return { email: user.email, email_verified: user.email_verified ?? true, preferred_username: user.preferred_username, ...groups };
  },
  responseTypes: ['code'],
  pkce: { methods: ['S256'], required: () => true },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // A client that names no resource still gets a token for the MCP server rather than an opaque
      // userinfo token; the first --resource is the MCP server's.
      async defaultResource(ctx, client, oneOf) {
        return oneOf ?? args.resource[0];
      },
      async useGrantedResource() {
        return true;
      },
      async getResourceServerInfo(ctx, resourceIndicator) {
        if (!resources.has(resourceIndicator)) throw new errors.InvalidTarget();
        return {
          scope: RESOURCE_SCOPES,
          audience: resourceIndicator,
          accessTokenTTL: ctx.oidc?.params?.grant_type === 'refresh_token' ? refreshedTokenTTL : accessTokenTTL,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: algs.get(resourceIndicator) ?? args.alg } },
        };
      },
    },
  },
  async issueRefreshToken(ctx, client) {
    return client.grantTypeAllowed('refresh_token');
  },
});

const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(ctx, status, title, body) {
  ctx.status = status;
  ctx.type = 'html';
  ctx.set('cache-control', 'no-store');
  ctx.body = `<!doctype html><html><head><meta charset="utf-8"><title>${escape(title)}</title></head><body>${body}</body></html>`;
}

function loginForm(ctx, uid, status, message) {
  page(ctx, status, 'Sign in', `<h1>Sign in</h1>${message ? `<p role="alert">${escape(message)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
<label>Email <input name="login" autocomplete="username"></label>
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
<button type="submit">Sign in</button></form>`);
}

async function formBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

// Middleware put in front of the provider's own routes: only /interaction/* is ours.
provider.use(async (ctx, next) => {
  const match = /^\/interaction\/([^/]+)(?:\/(login|confirm|abort))?$/.exec(ctx.path);
  if (!match) return next();
  const [, uid, action] = match;
  try {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    if (details.uid !== uid) throw new errors.SessionNotFound('interaction mismatch');
    const { prompt, params } = details;
    if (!action && ctx.method === 'GET') {
      if (prompt.name === 'login') return loginForm(ctx, uid, 200);
      const client = await provider.Client.find(params.client_id);
      return page(ctx, 200, 'Authorize', `<h1>Authorize ${escape(client?.clientName ?? params.client_id)}</h1>
<p>Scopes: ${escape(params.scope)}</p>
<form method="post" action="/interaction/${escape(uid)}/confirm"><button type="submit">Allow</button></form>
<form method="post" action="/interaction/${escape(uid)}/abort"><button type="submit">Deny</button></form>`);
    }
    if (ctx.method !== 'POST') return page(ctx, 405, 'Method not allowed', '<p>Use the form.</p>');
    if (action === 'login') {
      if (prompt.name !== 'login') throw new errors.InvalidRequest('this interaction is not a login');
      const form = await formBody(ctx.req);
      const login = form.get('login') ?? '';
      const user = users.find((u) => u.email === login || u.preferred_username === login);
      if (!user || user.password !== form.get('password')) return loginForm(ctx, uid, 403, 'Wrong email or password.');
      return provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: user.sub } }, { mergeWithLastSubmission: false });
    }
    if (action === 'confirm') {
      if (prompt.name !== 'consent') throw new errors.InvalidRequest('this interaction is not a consent');
      const { details: missing } = prompt;
      const grant = details.grantId
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
      if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
      if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
      for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
        grant.addResourceScope(indicator, scopes.join(' '));
      }
      const grantId = await grant.save();
      const consent = details.grantId ? {} : { grantId };
      return provider.interactionFinished(ctx.req, ctx.res, { consent }, { mergeWithLastSubmission: true });
    }
    return provider.interactionFinished(
      ctx.req,
      ctx.res,
      { error: 'access_denied', error_description: 'End-User declined the request' },
      { mergeWithLastSubmission: false },
    );
  } catch (err) {
    if (!(err instanceof errors.OIDCProviderError)) throw err;
    return page(ctx, err.statusCode ?? 400, 'Error', `<p>${escape(err.message)}: ${escape(err.error_description ?? '')}</p>`);
  }
});

const server = provider.listen(port, '127.0.0.1', () => {
  console.error(`oidc-provider listening: ${issuer} (port ${port}, resources ${[...resources].join(' ')})`);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
