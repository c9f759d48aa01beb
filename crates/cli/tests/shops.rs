//! `chargeonce shops add` and `shops set-webhook`: the secrets an operator
//! chooses are checked before anything is created.
#![allow(clippy::unwrap_used, missing_docs)]

use std::process::Output;

async fn chargeonce(args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_chargeonce"))
        .args(args)
        .env_remove("CHARGEONCE_DATABASE_URL")
        .env_remove("CHARGEONCE_SHOP_WEBHOOK_SECRET")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("run chargeonce")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn empty_and_short_shop_secrets_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shops.db");
    let url = format!("sqlite://{}", db.display());
    for (secret, says) in [
        ("", "must not be empty"),
        ("sk_short", "at least 16 characters, this one has 8"),
        ("sk_0123456789ab", "at least 16 characters, this one has 15"),
        ("sk_0123456789 abcdef", "visible ASCII"),
    ] {
        let out = chargeonce(&[
            "shops",
            "add",
            "demo",
            "--secret",
            secret,
            "--database-url",
            &url,
        ])
        .await;
        assert!(!out.status.success(), "{secret:?} was accepted");
        assert!(stderr(&out).contains(says), "{secret:?}: {}", stderr(&out));
        assert!(!db.exists(), "{secret:?}: the store was created anyway");
    }
    let out = chargeonce(&[
        "shops",
        "add",
        "demo",
        "--secret",
        "sk_0123456789abc",
        "--database-url",
        &url,
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));

    // A webhook signing secret chosen by hand, too.
    for secret in ["", "whsec_short"] {
        let out = chargeonce(&[
            "shops",
            "set-webhook",
            "--shop",
            "demo",
            "--url",
            "http://127.0.0.1:1/hooks",
            "--secret",
            secret,
            "--database-url",
            &url,
        ])
        .await;
        assert!(!out.status.success(), "{secret:?} was accepted");
        assert!(
            stderr(&out).contains("at least 16 characters"),
            "{secret:?}: {}",
            stderr(&out)
        );
    }
}
