//! [`AcquirerCredentials`]: HTTP Basic credentials for the acquirer, given
//! as a flag or in the URL's userinfo (taken out of the URL so no error
//! message, which names the URL, can carry them).

use reqwest::Url;

/// HTTP Basic credentials for the acquirer (`serve --acquirer-credentials
/// user:password`). Never printed: `Debug` shows the user only.
#[derive(Clone, PartialEq, Eq)]
pub struct AcquirerCredentials {
    user: String,
    password: String,
}

impl AcquirerCredentials {
    /// Credentials of `user` with `password`.
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            user: user.into(),
            password: password.into(),
        }
    }

    /// `user:password` (the password may hold `:`); `None` without a `:`.
    pub fn parse(text: &str) -> Option<Self> {
        let (user, password) = text.split_once(':')?;
        Some(Self::new(user, password))
    }

    /// The `Authorization` header's value, marked sensitive (hyper never
    /// logs it, and HTTP/2 never indexes it).
    pub(crate) fn header(&self) -> Option<reqwest::header::HeaderValue> {
        use base64::Engine as _;
        let encoded = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", self.user, self.password));
        let mut value = reqwest::header::HeaderValue::from_str(&format!("Basic {encoded}")).ok()?;
        value.set_sensitive(true);
        Some(value)
    }
}

impl std::fmt::Debug for AcquirerCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcquirerCredentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Takes the userinfo out of `url` (so no error message, which names the
/// URL, can carry it), as credentials.
pub(crate) fn take_userinfo(url: &mut Url) -> Option<AcquirerCredentials> {
    if url.username().is_empty() && url.password().is_none() {
        return None;
    }
    let credentials = AcquirerCredentials::new(
        percent_decode(url.username()),
        percent_decode(url.password().unwrap_or_default()),
    );
    let _ = url.set_username("");
    let _ = url.set_password(None);
    Some(credentials)
}

/// `%XX` escapes of a URL's userinfo, decoded (lossily for bad UTF-8).
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}
