//! What every request passes before a handler: its id and span (`observe`), the `Host`
//! allow-list and the bearer token (`guard`, which gives each handler its `Caller`), and the
//! token buckets of the request rate and of failed authentications.

use super::config::MAX_URI_BYTES;
use super::error::ApiError;
use super::{AppState, QUERY_KEYS, ROUTES, Shared};
use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::Mutex;

/// Who is calling: the client's name, or `None` when the service runs without tokens.
#[derive(Clone, Debug)]
pub struct Caller(pub Option<String>);

/// The id of the HTTP request being served (also the `x-request-id` response header); jobs
/// record it, so a solve's log lines can be traced to the request that queued it.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// Refuses a query key the route does not read (`QUERY_KEYS`), naming it and the keys the route
/// takes; the handler parses the values.
pub(super) async fn known_query(req: Request, next: axum::middleware::Next) -> Response {
    let Some(query) = req.uri().query().filter(|q| !q.is_empty()) else {
        return next.run(req).await;
    };
    // The API's routes only: a health probe or a scraper may add a query of its own (a
    // cache buster) to /healthz, /readyz or /metrics, which read none and mean no harm.
    let Some(route) = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_string())
        .filter(|r| r.starts_with("/v1/"))
    else {
        return next.run(req).await;
    };
    // HEAD is served by the GET route; a method the route does not take is left to its 405.
    let method = if req.method() == axum::http::Method::HEAD { "GET" } else { req.method().as_str() };
    if !ROUTES.iter().any(|(m, p)| *m == method && *p == route) {
        return next.run(req).await;
    }
    let keys: &[&str] =
        QUERY_KEYS.iter().find(|(m, p, _)| *m == method && *p == route).map_or(&[], |(_, _, keys)| keys);
    let unknown = form_urlencoded::parse(query.as_bytes()).map(|(k, _)| k).find(|k| !keys.contains(&k.as_ref()));
    match unknown {
        None => next.run(req).await,
        Some(k) => {
            let takes = if keys.is_empty() { "none".to_string() } else { keys.join(", ") };
            let k: String = k.chars().take(64).collect();
            let message = format!("unknown query key: {method} {route} takes {takes}");
            ApiError::BadQueryKey(crate::error::FieldError { path: k, message }).into_response()
        }
    }
}

/// Request ids, tracing spans, and the per-route request counter.
pub(super) async fn observe(State(st): State<Shared>, req: Request, next: axum::middleware::Next) -> Response {
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = req.method().to_string();
    // The metrics' label takes the standard methods only: any other string (an unauthenticated
    // client may send thousands) is `other`, so /metrics cannot grow without bound.
    let method_label = match req.method().as_str() {
        m @ ("GET" | "POST" | "PUT" | "DELETE" | "PATCH" | "HEAD" | "OPTIONS") => m.to_string(),
        _ => "other".to_string(),
    };
    let id = crate::store::new_id();
    let span = tracing::info_span!("request", request_id = %id, %method, %route);
    let mut req = req;
    req.extensions_mut().insert(RequestId(id.clone()));
    let mut resp = tracing::Instrument::instrument(next.run(req), span).await;
    if let Ok(v) = id.parse() {
        resp.headers_mut().insert("x-request-id", v);
    }
    st.metrics.request(method_label, route, resp.status().as_u16());
    resp
}

/// The peer's address, set per connection by the accept loop.
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub std::net::SocketAddr);

/// The `Host` allow-list (every route) and, with tokens, the bearer token (the `/v1/` routes;
/// health, metrics and the OpenAPI document stay open): a `Caller` for the handlers.
pub(super) async fn guard(State(st): State<Shared>, mut req: Request, next: axum::middleware::Next) -> Response {
    if req.uri().path_and_query().map_or(0, |p| p.as_str().len()) > MAX_URI_BYTES {
        return ApiError::UriTooLong(MAX_URI_BYTES).into_response();
    }
    // RFC 9112 §3.2: a request with more than one Host is a 400, whatever the allow-list.
    let hosts = req.headers().get_all(header::HOST).iter().count();
    if hosts > 1 {
        return ApiError::HostHeaders(hosts).into_response();
    }
    if let Some(allowed) = &st.config.allowed_hosts {
        // An absolute-form target (`GET http://evil.example/v1/...`) names the host itself, and
        // a server uses it rather than the Host header (RFC 9112 §3.2.2): both are checked.
        let header = req.headers().get(header::HOST).map(|h| h.to_str().unwrap_or("\u{fffd}"));
        let named = req.uri().authority().map(|a| a.as_str()).into_iter().chain(header.or(Some("")));
        for host in named {
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(host_name(host))) {
                return ApiError::BadHost(host.chars().take(100).collect()).into_response();
            }
        }
    }
    let path = req.uri().path();
    let guarded = path.starts_with("/v1/") || (st.config.private_metrics && path == "/metrics");
    let caller = if st.config.clients.is_empty() || !guarded {
        Caller(None)
    } else {
        let headers = req.headers().get_all(header::AUTHORIZATION).iter().count();
        if headers > 1 {
            return ApiError::AuthorizationHeaders(headers).into_response();
        }
        // The scheme is case-insensitive (RFC 9110 §11.1): `bearer`, `BEARER`.
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.trim_start().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        let Some(client) = given.and_then(|t| st.config.clients.iter().find(|c| same_secret(&c.token, t))) else {
            // Failed attempts are counted per address: a client guessing tokens gets 429s.
            if let Some(Peer(peer)) = req.extensions().get::<Peer>().copied() {
                let rate = st.config.max_auth_failures_per_s;
                let keys = (network_of(peer.ip()), std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED));
                if let Err(wait_s) = take_token(&st.auth_failures, keys, rate, 10.0 * rate) {
                    return ApiError::RateLimited(wait_s).into_response();
                }
            }
            return ApiError::Unauthorized.into_response();
        };
        if let Err(wait_s) = spend(&st, &client.name) {
            return ApiError::RateLimited(wait_s).into_response();
        }
        Caller(Some(client.name.clone()))
    };
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// Takes one request from `client`'s allowance (`max_requests_per_s` a second, in bursts of as
/// many); when it is spent, the seconds until one more is allowed.
fn spend(st: &AppState, client: &str) -> Result<(), f64> {
    let rate = st.config.max_requests_per_s;
    take_token(&st.allowance, (client.to_string(), String::new()), rate, rate)
}

/// The address failed authentications are counted by: an IPv4 address, or an IPv6 address's
/// /64 (one host may hold all of its 2^64 addresses).
fn network_of(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => {
            std::net::IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1)))
        }
        other => other,
    }
}

/// Buckets kept before the full ones (idle keys) are dropped: a map of addresses stays small.
const MAX_BUCKETS: usize = 4096;

/// Takes one token from `key`'s bucket (refilled at `rate` a second up to `burst`, at least
/// 1); when it is empty, the seconds until one more is allowed. A rate ≤ 0 allows everything.
/// Beyond `MAX_BUCKETS` keys, new ones share the `overflow` key's bucket.
fn take_token<K: std::hash::Hash + Eq>(
    buckets: &Mutex<HashMap<K, (f64, std::time::Instant)>>,
    (key, overflow): (K, K),
    rate: f64,
    burst: f64,
) -> Result<(), f64> {
    if rate <= 0.0 || !rate.is_finite() {
        return Ok(());
    }
    let burst = burst.max(1.0);
    let now = std::time::Instant::now();
    let mut all = buckets.lock().unwrap_or_else(|e| e.into_inner());
    let mut key = key;
    if all.len() >= MAX_BUCKETS && !all.contains_key(&key) {
        // A bucket that has refilled is the same as none.
        all.retain(|_, (left, at)| *left + now.duration_since(*at).as_secs_f64() * rate < burst);
        if all.len() >= MAX_BUCKETS {
            // Still full (many keys at once): newcomers share one bucket, so the map and each
            // sweep stay bounded.
            key = overflow;
        }
    }
    let (left, at) = all.entry(key).or_insert((burst, now));
    *left = (*left + now.duration_since(*at).as_secs_f64() * rate).min(burst);
    *at = now;
    if *left >= 1.0 {
        *left -= 1.0;
        Ok(())
    } else {
        Err((1.0 - *left) / rate)
    }
}

/// The host part of a `Host` header: without its port, brackets kept off an IPv6 literal.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    host.rsplit_once(':').map_or(host, |(h, port)| if port.chars().all(|c| c.is_ascii_digit()) { h } else { host })
}

/// Compares two secrets in time independent of where they differ (their lengths may leak).
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::{MAX_BUCKETS, network_of, take_token};
    use std::collections::HashMap;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    use std::sync::Mutex;

    #[test]
    fn failures_are_counted_per_ipv4_address_and_per_ipv6_slash_64() {
        let v4 = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7));
        assert_eq!(network_of(v4), v4);
        let a: IpAddr = "2001:db8:1:2:aaaa:bbbb:cccc:dddd".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        assert_eq!(network_of(a), network_of(b));
        assert_eq!(network_of(a), "2001:db8:1:2::".parse::<IpAddr>().unwrap());
        assert_ne!(network_of(a), network_of("2001:db8:1:3::1".parse().unwrap()));
        let mapped: IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        assert_eq!(network_of(mapped), mapped, "an IPv4 client over IPv6 keeps its address");
    }

    #[test]
    fn a_bucket_empties_then_refuses_and_the_map_stays_bounded() {
        let buckets = Mutex::new(HashMap::new());
        let overflow = IpAddr::V6(Ipv6Addr::UNSPECIFIED);
        let one = IpAddr::V4(Ipv4Addr::LOCALHOST);
        // A burst of 3 at 0.001 a second: three pass, the fourth waits about 1000 s.
        for _ in 0..3 {
            assert!(take_token(&buckets, (one, overflow), 0.001, 3.0).is_ok());
        }
        let wait = take_token(&buckets, (one, overflow), 0.001, 3.0).unwrap_err();
        assert!((900.0..=1000.0).contains(&wait), "{wait}");
        // Many addresses, each spending its bucket: beyond the cap they share one.
        for i in 0..(MAX_BUCKETS as u32 + 100) {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
            let _ = take_token(&buckets, (ip, overflow), 0.001, 1.0);
        }
        assert!(buckets.lock().unwrap().len() <= MAX_BUCKETS + 1);
        assert!(take_token(&buckets, (IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), overflow), 0.001, 1.0).is_err());
        // No rate: no limit.
        assert!(take_token(&buckets, (one, overflow), 0.0, 1.0).is_ok());
    }
}
