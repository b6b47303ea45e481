//! Where a store over HTTP is: `https://HOST[:PORT][/PREFIX]/v1/memory_stores/ID`,
//! the memory stores API of Anthropic or of a memfs server (`serve
//! --http`). The key never rides in the URL: it comes from an environment
//! variable, so a URL with a user part is refused (without showing it).
//! Plain `http://` only to this machine (loopback), unless the caller
//! allows it (`--insecure-http`): the key would cross a network in clear.

/// A store over HTTP: the endpoint (with any prefix, without `/v1/...`)
/// and the store's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUrl {
    /// `http(s)://host[:port][/prefix]`, no trailing `/`.
    pub base: String,
    pub store: String,
}

/// A store URL memfs does not take, in words for a person (never the URL's
/// user part).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UrlError {
    #[error("a store over HTTP is named by a URL that ends in /v1/memory_stores/STORE_ID")]
    NoStore,
    #[error("`{0}` is not a store id (letters, digits, '_' and '-')")]
    BadStore(String),
    #[error("the store's URL holds a user part: memfs takes the API key from an environment variable (--store-key-env, default ANTHROPIC_API_KEY), never from the URL")]
    UserPart,
    #[error("http:// sends the API key in clear: use https://, or http:// to this machine (127.0.0.1, [::1], localhost), or say --insecure-http")]
    Clear,
    #[error("the store's URL has no host")]
    NoHost,
}

/// Whether `--data` names a store over HTTP rather than a data dir.
pub fn is_store_url(text: &str) -> bool {
    text.starts_with("https://") || text.starts_with("http://")
}

impl StoreUrl {
    /// Parses `text`; `insecure`: plain http:// to any host is taken.
    pub fn parse(text: &str, insecure: bool) -> Result<StoreUrl, UrlError> {
        let (scheme, rest) = text.split_once("://").ok_or(UrlError::NoStore)?;
        let text = text.trim_end_matches('/');
        let (before, store) = text
            .rsplit_once("/v1/memory_stores/")
            .ok_or(UrlError::NoStore)?;
        if store.is_empty()
            || !store
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(UrlError::BadStore(crate::text::label(store)));
        }
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if authority.contains('@') {
            return Err(UrlError::UserPart);
        }
        if authority.is_empty() {
            return Err(UrlError::NoHost);
        }
        if before.contains(['?', '#']) {
            return Err(UrlError::NoStore);
        }
        if scheme == "http" && !insecure && !is_loopback(authority) {
            return Err(UrlError::Clear);
        }
        Ok(StoreUrl {
            base: before.to_string(),
            store: store.to_string(),
        })
    }

    /// The URL as given back (it holds no secret).
    pub fn shown(&self) -> String {
        format!("{}/v1/memory_stores/{}", self.base, self.store)
    }

    /// The host (and port) alone, as the history names who made a version.
    pub fn host(&self) -> &str {
        let rest = self.base.split_once("://").map_or("", |(_, r)| r);
        rest.split('/').next().unwrap_or(rest)
    }

    /// The name of this machine's cache of it under `./memory-remote`:
    /// `HOST_PORT_STOREID`, every other character `_`.
    pub fn cache_name(&self) -> String {
        format!("{}_{}", self.host(), self.store)
            .chars()
            .map(
                |c| match c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    true => c,
                    false => '_',
                },
            )
            .collect()
    }
}

/// Whether `authority` (`host[:port]`) is this machine.
fn is_loopback(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_url_gives_its_endpoint_store_and_cache_name() {
        let u = StoreUrl::parse(
            "https://api.example.com/v1/memory_stores/memstore_01Ab",
            false,
        )
        .unwrap();
        assert_eq!(u.base, "https://api.example.com");
        assert_eq!(u.store, "memstore_01Ab");
        assert_eq!(u.cache_name(), "api.example.com_memstore_01Ab");
        let u = StoreUrl::parse("http://127.0.0.1:8080/pre/v1/memory_stores/s1/", false).unwrap();
        assert_eq!(u.base, "http://127.0.0.1:8080/pre");
        assert_eq!(u.host(), "127.0.0.1:8080");
        assert_eq!(u.cache_name(), "127.0.0.1_8080_s1");
        assert!(StoreUrl::parse("http://[::1]:9/v1/memory_stores/s", false).is_ok());
        assert!(StoreUrl::parse("http://localhost/v1/memory_stores/s", false).is_ok());
    }

    #[test]
    fn what_is_not_a_store_url_is_refused_in_words_that_show_no_secret() {
        let e = StoreUrl::parse("https://sk-secret@host/v1/memory_stores/s", false).unwrap_err();
        assert_eq!(e, UrlError::UserPart);
        assert!(!e.to_string().contains("sk-secret"));
        assert_eq!(
            StoreUrl::parse("https://host/v1/memory_stores/", false),
            Err(UrlError::NoStore)
        );
        assert!(matches!(
            StoreUrl::parse("https://host/v1/memory_stores/a%2e", false),
            Err(UrlError::BadStore(_))
        ));
        assert_eq!(
            StoreUrl::parse("https://host/v1/other/s", false),
            Err(UrlError::NoStore)
        );
        assert!(matches!(
            StoreUrl::parse("https://host/v1/memory_stores/a/b", false),
            Err(UrlError::BadStore(_))
        ));
        assert_eq!(
            StoreUrl::parse("http://10.0.0.2/v1/memory_stores/s", false),
            Err(UrlError::Clear)
        );
        assert!(StoreUrl::parse("http://10.0.0.2/v1/memory_stores/s", true).is_ok());
        assert_eq!(
            StoreUrl::parse("https:///v1/memory_stores/s", false),
            Err(UrlError::NoHost)
        );
    }
}
