//! URLs as they may be printed: without the parts that carry secrets.

use reqwest::Url;

/// `url` without its userinfo (`user:password@`) and with its query and
/// fragment replaced by `…`, for logs and start-up lines. A string that does
/// not parse as a URL is not printed at all.
///
/// ```
/// use chargeonce_connector::redact_url;
/// assert_eq!(
///     redact_url("https://merchant:s3cret@acq.example/v1?token=abc"),
///     "https://acq.example/v1?…"
/// );
/// assert_eq!(redact_url("not a url"), "<unparsable URL>");
/// ```
pub fn redact_url(url: &str) -> String {
    let Ok(mut parsed) = Url::parse(url) else {
        return "<unparsable URL>".to_owned();
    };
    // Neither can fail on a URL with a host, the only kind that has them.
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    let had_query = parsed.query().is_some() || parsed.fragment().is_some();
    parsed.set_query(None);
    parsed.set_fragment(None);
    let mut shown = parsed.to_string();
    if had_query {
        shown.push_str("?…");
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_and_queries_are_never_shown() {
        assert_eq!(
            redact_url("http://127.0.0.1:9000"),
            "http://127.0.0.1:9000/"
        );
        assert_eq!(redact_url("http://u:p@h:1/a/b"), "http://h:1/a/b");
        assert_eq!(redact_url("http://only-user@h/"), "http://h/");
        assert_eq!(redact_url("http://h/x?key=1#frag"), "http://h/x?…");
        assert!(!redact_url("http://u:p%40ss@h/").contains("ss"));
    }
}
