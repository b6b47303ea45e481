//! Credential screening (`--secrets`): generated credentials of every kind
//! are caught; prose and code that merely talk about passwords, tokens and
//! keys are not; and through the real binary, a refused write stores
//! nothing, a redacted one stores no credential anywhere under the data dir.

mod common;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::json;

use common::{content, exec_stdin, memfs, Server};
use memfs::guard::secrets;

/// Each kind with a generator written from its published format, in the
/// context it usually appears in.
const FORMATS: &[(&str, &str)] = &[
    ("aws_access_key_id", "AKIA[0-9A-Z]{16}"),
    ("aws_secret_access_key", "aws_secret_access_key = [A-Za-z0-9/+]{40}"),
    ("gcp_api_key", "AIza[0-9A-Za-z_\\-]{35}"),
    ("gcp_service_account_key", "\"private_key_id\": \"[0-9a-f]{40}\""),
    ("google_oauth_client_secret", "GOCSPX-[A-Za-z0-9_\\-]{28}"),
    ("azure_storage_connection_string", "DefaultEndpointsProtocol=https;AccountName=[a-z0-9]{8};AccountKey=[A-Za-z0-9+/]{86}==;EndpointSuffix=core\\.windows\\.net"),
    ("anthropic_api_key", "sk-ant-api03-[A-Za-z0-9_\\-]{93}AA"),
    ("openai_api_key", "sk-proj-[A-Za-z0-9_\\-]{20}T3BlbkFJ[A-Za-z0-9_\\-]{20}"),
    ("github_token", "ghp_[A-Za-z0-9]{36}"),
    ("github_token", "github_pat_[A-Za-z0-9_]{82}"),
    ("gitlab_token", "glpat-[A-Za-z0-9_\\-]{20}"),
    ("slack_token", "xoxb-[0-9]{11}-[0-9]{13}-[A-Za-z0-9]{24}"),
    ("stripe_key", "sk_live_[A-Za-z0-9]{24}"),
    ("huggingface_token", "hf_[A-Za-z0-9]{34}"),
    ("npm_token", "npm_[A-Za-z0-9]{36}"),
    ("pypi_token", "pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\\-]{60}"),
    ("sendgrid_api_key", "SG\\.[A-Za-z0-9_\\-]{22}\\.[A-Za-z0-9_\\-]{43}"),
    ("private_key", "-----BEGIN RSA PRIVATE KEY-----\n[A-Za-z0-9+/]{64}\n[A-Za-z0-9+/]{64}\n-----END RSA PRIVATE KEY-----"),
    ("jwt", "eyJ[A-Za-z0-9_\\-]{20}\\.eyJ[A-Za-z0-9_\\-]{30}\\.[A-Za-z0-9_\\-]{43}"),
    ("database_url_password", "postgres://app:[A-Za-z0-9]{12}@db\\.example\\.com:5432/app"),
    ("url_password", "https://deploy:[A-Za-z0-9]{12}@git\\.example\\.com/repo\\.git"),
    ("authorization_header", "Authorization: Bearer [A-Za-z0-9]{32}"),
    ("password_assignment", "password=[a-z]{4}[0-9]{2}[A-Z!#%]{2}"),
    ("secret_assignment", "api_key = [A-Za-z]{16}[0-9]{4}[A-Za-z0-9]{12}"),
];

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::cases("MEMFS_SECRET_CASES", 512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_generated_credential_is_caught(
        (which, credential) in (0..FORMATS.len()).prop_flat_map(|i| {
            (Just(i), proptest::string::string_regex(FORMATS[i].1).unwrap())
        }),
        before in "[a-z ]{0,20}",
    ) {
        let kind = FORMATS[which].0;
        let text = format!("notes\n{before} {credential} and more\n");
        let found = secrets::scan(&text);
        prop_assert!(found.iter().any(|f| f.kind == kind), "{kind} not caught in {text:?}: {found:?}");
        prop_assert!(found.iter().all(|f| f.line == 2), "{found:?}");
    }
}

/// The shrunk failure of `every_generated_credential_is_caught` kept in
/// tests/secrets.proptest-regressions: a password that starts like a
/// reference (`env`) was taken for one.
#[test]
fn regression_a_password_that_starts_like_a_reference_word_is_caught() {
    let text = "notes\nnvh vt v  u l password=enva00## and more\n";
    let kinds: Vec<&str> = secrets::scan(text).iter().map(|f| f.kind).collect();
    assert_eq!(kinds, ["password_assignment"], "{text}");
    // The reference itself still passes.
    assert_eq!(secrets::scan("password = env[\"DB_PASSWORD\"]"), vec![]);
}

#[test]
fn the_formats_cover_every_kind() {
    let covered: std::collections::BTreeSet<&str> = FORMATS.iter().map(|(k, _)| *k).collect();
    let known: std::collections::BTreeSet<&str> = secrets::kinds().into_iter().collect();
    assert_eq!(covered, known);
    assert!(known.len() >= 15, "{} kinds", known.len());
}

#[test]
fn prose_and_code_about_secrets_pass() {
    let prose = [
        "Password policy: at least 12 characters, rotated every 90 days.",
        "The token bucket refills at 10 tokens per second; a request takes one token.",
        "Never commit your API key. Set it in the environment: export ANTHROPIC_API_KEY=...",
        "password: ********",
        "password = os.environ['DB_PASSWORD']",
        "token = get_token(user)",
        "let password = read_password()?;",
        "api_key: ${API_KEY}",
        "secret = <your secret here>",
        "postgres://user:password@localhost/db",
        "mysql://root:${MYSQL_ROOT_PASSWORD}@db/app",
        "The user's password is hashed with argon2; the secret key is in Vault.",
        "fn check(password: &str, token: Option<Token>) -> bool",
        "pub const MAX_TOKEN_LEN: usize = 4096;",
        "Use a JWT (a header, a payload and a signature: eyJ...) for sessions.",
        "-----BEGIN PRIVATE KEY----- is how a PEM key starts.",
        "AWS keys start with AKIA; GitHub tokens with ghp_.",
        // The code the wider corpus of docs/SECRETS.md taught us to pass.
        "pub type SET_SERVICE_ACCOUNT_PASSWORD = Option<unsafe extern \"system\" fn()>;",
        "password: Optional[HiddenText] = None",
        "headers[\"Proxy-Authorization\"] = _basic_auth_str(username, password)",
        "user = User(username='scolvin', password='password1')",
        "url = URL(\"https://jo%40email.com:a%20secret@example.de:1234/\")",
        "MultiHostUrl('https://foo.com:123,foo:bar@bar.com/path')",
        "DB_PASSWORD_FILE=/run/secrets/db_password",
        "export declare function pbkdf2(password: Uint8Array, salt: Uint8Array): Uint8Array;",
    ];
    for text in prose {
        assert_eq!(secrets::scan(text), vec![], "{text}");
    }
}

/// The crates `Cargo.lock` names from the registry, as `NAME-VERSION`.
fn locked_crates() -> Vec<String> {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock"))
        .expect("Cargo.lock is committed");
    let mut out = Vec::new();
    for package in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            package.lines().find_map(|l| {
                l.strip_prefix(key)
                    .and_then(|v| v.trim().strip_prefix('='))
                    .map(|v| v.trim().trim_matches('"').to_string())
            })
        };
        let from_registry = field("source ").is_some_and(|s| s.starts_with("registry+"));
        if let (true, Some(name), Some(version)) =
            (from_registry, field("name "), field("version "))
        {
            out.push(format!("{name}-{version}"));
        }
    }
    out
}

#[test]
fn the_crates_this_project_builds_from_hold_no_false_alarm() {
    // Their READMEs and docs: real prose about keys and tokens (their Rust
    // sources too, 136 MB, in docs/SECRETS.md: too slow for a debug build).
    // Only the crates Cargo.lock names, by name and version: whatever else
    // this machine's cargo once fetched is not this project's corpus.
    let Some(home) = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cargo")))
    else {
        panic!("no CARGO_HOME or HOME");
    };
    let indexes: Vec<std::path::PathBuf> = std::fs::read_dir(home.join("registry/src"))
        .expect("the registry's sources (cargo fetched them to build this test)")
        .flatten()
        .map(|e| e.path())
        .collect();
    let crates = locked_crates();
    let mut stack: Vec<std::path::PathBuf> = crates
        .iter()
        .filter_map(|c| indexes.iter().map(|i| i.join(c)).find(|p| p.is_dir()))
        .collect();
    // Crates for other platforms (windows-*) are locked but never fetched.
    assert!(
        stack.len() * 2 > crates.len(),
        "only {} of the {} locked crates are in the registry",
        stack.len(),
        crates.len()
    );
    let (mut files, mut alarms) = (0, Vec::new());
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            stack.extend(
                std::fs::read_dir(&path)
                    .unwrap()
                    .flatten()
                    .map(|e| e.path()),
            );
        } else if path.extension().is_some_and(|e| e == "md") {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            files += 1;
            for f in secrets::scan(&text) {
                alarms.push(format!("{}:{}: {}", path.display(), f.line, f.kind));
            }
        }
    }
    assert!(files > 200, "only {files} files: the corpus is missing");
    assert!(
        alarms.is_empty(),
        "{} false alarms:\n{}",
        alarms.len(),
        alarms.join("\n")
    );
}

const GITHUB: &str = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";

#[test]
fn refused_writes_store_nothing_through_the_real_binary() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let made = server.call(&json!({"command": "create", "path": "/memories/deploy.md", "file_text": "deploy with the token below\nTOKEN_PLACE\n"}).to_string());
    assert_eq!(made["is_error"], false);
    // A str_replace that brings a GitHub token in: refused, file unchanged.
    let edit = server.call(
        &json!({"command": "str_replace", "path": "/memories/deploy.md",
        "old_str": "TOKEN_PLACE", "new_str": GITHUB})
        .to_string(),
    );
    assert_eq!(edit["is_error"], true);
    assert_eq!(
        content(&edit),
        "Error: /memories/deploy.md would hold what looks like a credential (github_token on line 2); memfs does not store credentials, and nothing was changed. Store a reference to where it lives instead, such as the name of the environment variable or secret-manager entry that holds it."
    );
    // Assembled by two edits: the second completes it and is refused.
    let (half, rest) = GITHUB.split_at(20);
    let first = server.call(
        &json!({"command": "str_replace", "path": "/memories/deploy.md",
        "old_str": "TOKEN_PLACE", "new_str": half})
        .to_string(),
    );
    assert_eq!(first["is_error"], false, "{first}");
    let second = server.call(
        &json!({"command": "insert", "path": "/memories/deploy.md",
        "insert_line": 2, "insert_text": rest})
        .to_string(),
    );
    assert_eq!(second["is_error"], false, "{second}");
    let joined = server.call(
        &json!({"command": "str_replace", "path": "/memories/deploy.md",
        "old_str": format!("{half}\n{rest}"), "new_str": GITHUB})
        .to_string(),
    );
    assert_eq!(joined["is_error"], true, "{joined}");
    // Each kind in a create: refused, and nothing stored.
    for (i, (kind, format)) in FORMATS.iter().enumerate() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let credential = proptest::string::string_regex(format)
            .unwrap()
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let path = format!("/memories/kind-{i}.md");
        let refused = server.call(&json!({"command": "create", "path": path, "file_text": format!("key: {credential}\n")}).to_string());
        assert_eq!(refused["is_error"], true, "{kind}: {refused}");
        assert!(content(&refused).contains(kind), "{refused}");
        assert!(
            !content(&refused).contains(credential.as_str()),
            "the error never echoes it"
        );
        assert!(!dir.path().join(format!("memories/kind-{i}.md")).exists());
    }
    // Prose about password policies and token buckets is accepted.
    let prose = server.call(
        &json!({"command": "create", "path": "/memories/policy.md",
        "file_text": "Password policy: 12+ characters.\nThe token bucket holds 10 tokens.\n"})
        .to_string(),
    );
    assert_eq!(prose["is_error"], false, "{prose}");
    assert!(server.finish().success());
}

#[test]
fn redacted_credentials_are_nowhere_under_the_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let key = "sk-ant-api03-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyzAA";
    let (code, v, _) = exec_stdin(
        dir.path(),
        &["--secrets", "redact"],
        &json!({"command": "create", "path": "/memories/setup.md", "file_text": format!("the key is {key}\n")}),
    );
    assert_eq!(code, 0, "{v}");
    assert!(
        content(&v)
            .contains("memfs redacted 1 credential(s) before storing: anthropic_api_key on line 1"),
        "{v}"
    );
    let (code, v, _) = exec_stdin(
        dir.path(),
        &["--secrets", "redact"],
        &json!({"command": "str_replace", "path": "/memories/setup.md", "old_str": "the key", "new_str": format!("the key {GITHUB}")}),
    );
    assert_eq!(code, 0, "{v}");
    assert!(
        !content(&v).contains(GITHUB),
        "the snippet never shows it: {v}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("memories/setup.md")).unwrap(),
        "the key [REDACTED:github_token] is [REDACTED:anthropic_api_key]\n"
    );
    let out = std::process::Command::new("grep")
        .args(["-r", "-l", "-e", key, "-e", GITHUB])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "found in {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn allow_turns_screening_off_and_scan_finds_what_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let (code, v, _) = exec_stdin(
        dir.path(),
        &["--secrets", "allow"],
        &json!({"command": "create", "path": "/memories/a/keys.md", "file_text": format!("ok\n{GITHUB}\n")}),
    );
    assert_eq!(code, 0, "{v}");
    std::fs::write(dir.path().join("memories/a/clean.md"), "nothing here\n").unwrap();
    let scan = |args: &[&str]| {
        let out = memfs()
            .arg("--data")
            .arg(dir.path())
            .arg("scan")
            .args(args)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, text) = scan(&[]);
    assert_eq!(code, Some(1), "credentials found: exit 1");
    assert_eq!(text, "/memories/a/keys.md:2: github_token\n");
    let (_, json_lines) = scan(&["--json", "/memories/a"]);
    let row: serde_json::Value = serde_json::from_str(json_lines.trim()).unwrap();
    assert_eq!(
        row,
        json!({"path": "/memories/a/keys.md", "line": 2, "kind": "github_token"})
    );
    let (code, text) = scan(&["/memories/a/clean.md"]);
    assert_eq!((code, text.as_str()), (Some(0), ""));
}

/// The forms of issue 19 that a user expects caught: `.env` and config
/// lines whose key names end in the word, headers, URLs of any scheme, and
/// keys glued to other text or with an invisible character inside.
#[test]
fn the_usual_env_config_header_and_url_forms_are_caught() {
    let glued = format!("x{GITHUB}x");
    let zero_width = format!("{}\u{200b}{}", &GITHUB[..12], &GITHUB[12..]);
    let soft_hyphen = format!("{}\u{ad}{}", &GITHUB[..20], &GITHUB[20..]);
    let cases: Vec<(String, &str)> = [
        ("DB_PASSWORD=Sup3rS3cretPw!", "password_assignment"),
        ("MYSQL_ROOT_PASSWORD=Hunter2Hunter2", "password_assignment"),
        ("POSTGRES_PASSWORD=pg-Secr3t-99", "password_assignment"),
        ("PGPASSWORD=Kx9mQ2vLp7", "password_assignment"),
        ("db_password: Tr0ub4dor&3", "password_assignment"),
        ("adminPassword = \"Adm1nPa55word\"", "password_assignment"),
        ("API_TOKEN=Zq8Xw3Rt6Yu1Io9Pa4Sd7Fg2", "secret_assignment"),
        (
            "access_token: 8f2k1m9x7q4w3e5r6t8y0u2i",
            "secret_assignment",
        ),
        (
            "DJANGO_SECRET_KEY=k8#2m!x9q$w4e7r1t6y3u0i5o",
            "secret_assignment",
        ),
        // In a URL's query: the value ends at the next `&`.
        (
            "https://api.example.com/v1?access_token=Zq8Xw3Rt6Yu1Io9Pa4Sd7Fg2&page=2",
            "secret_assignment",
        ),
        (
            "Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
            "authorization_header",
        ),
        (
            "curl -H 'authorization: token Zq8Xw3Rt6Yu1Io9Pa4Sd7Fg2' ...",
            "authorization_header",
        ),
        (
            "https://alice:S3cretPass99@git.example.com/repo.git",
            "url_password",
        ),
        (
            "smtp://mailer:Qw3rty-Zx9@mail.example.com:587",
            "url_password",
        ),
    ]
    .into_iter()
    .map(|(t, k)| (t.to_string(), k))
    .chain([
        (glued, "github_token"),
        (zero_width, "github_token"),
        (soft_hyphen, "github_token"),
        ("keyAKIAIOSFODNN7EXAMPLEQ".to_string(), "aws_access_key_id"),
    ])
    .collect();
    for (text, kind) in &cases {
        let line = format!("notes\n{text}\n");
        let found = secrets::scan(&line);
        assert!(
            found.iter().any(|f| f.kind == *kind && f.line == 2),
            "{kind} not caught in {text:?}: {found:?}"
        );
        // The finding covers the credential in the text as given (the
        // invisible characters included), so redaction leaves none of it.
        let redacted = secrets::redact(&line, &found);
        assert!(!redacted.contains(&GITHUB[..12]), "{redacted:?}");
    }
    // And what stays allowed: references, placeholders, paths, prose.
    for fine in [
        "DB_PASSWORD=${DB_PASSWORD}",
        "PGPASSWORD=$(cat /run/secrets/pg)",
        "db_password: /run/secrets/db_password",
        "PWD=/home/alice/project",
        "OLDPWD=~/src/memfs",
        "Authorization: Bearer $TOKEN",
        "Authorization: Bearer <token>",
        "https://user:${PASS}@example.com/",
        "https://github.com/owner/repo@v1",
        "access_token: null",
        "API_TOKEN=changeme",
        // A coverage badge's public graph token, then the URL's next field.
        "https://img.shields.io/codecov/c/gh/o/r?style=flat&token=P0YeuKXJyp&logo=codecov",
    ] {
        assert_eq!(secrets::scan(fine), vec![], "{fine}");
    }
}

/// Files under `dir` whose path or bytes hold `needle`.
fn holding(dir: &std::path::Path, needle: &str) -> Vec<String> {
    let out = std::process::Command::new("grep")
        .args(["-r", "-l", "-F", "-e", needle])
        .arg(dir)
        .output()
        .unwrap();
    let mut found: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let names = std::process::Command::new("find")
        .arg(dir)
        .args(["-name", &format!("*{needle}*")])
        .output()
        .unwrap();
    found.extend(
        String::from_utf8_lossy(&names.stdout)
            .lines()
            .map(str::to_string),
    );
    found
}

#[test]
fn credentials_in_names_are_refused_and_scan_finds_them_without_showing_them() {
    let dir = tempfile::tempdir().unwrap();
    let anthropic = "sk-ant-api03-0123456789abcdefghijklmnopqrstuvwxyzABCDEF";
    let aws = "AKIAIOSFODNN7EXAMPL2";
    let mut server = Server::start(dir.path(), &[]);
    let made = server.call(r#"{"command":"create","path":"/memories/ok.md","file_text":"fine\n"}"#);
    assert_eq!(made["is_error"], false);
    for (input, kind) in [
        (
            json!({"command": "create", "path": format!("/memories/s/{GITHUB}"), "file_text": "x\n"}),
            "github_token",
        ),
        (
            json!({"command": "create", "path": format!("/memories/{anthropic}/notes.md"), "file_text": "x\n"}),
            "anthropic_api_key",
        ),
        (
            json!({"command": "rename", "old_path": "/memories/ok.md", "new_path": format!("/memories/{aws}.md")}),
            "aws_access_key_id",
        ),
    ] {
        let refused = server.call(&input.to_string());
        assert_eq!(refused["is_error"], true, "{input}: {refused}");
        let text = content(&refused);
        assert!(text.contains(kind) && text.contains("name"), "{text}");
        for key in [GITHUB, anthropic, aws] {
            assert!(!text.contains(key), "the error echoes the name: {text}");
        }
    }
    // Under --secrets redact too: a name is refused, not rewritten.
    let listing = server.call(r#"{"command":"view","path":"/memories"}"#);
    assert!(content(&listing).contains("ok.md"), "{listing}");
    assert!(server.finish().success());
    let (_, refused, _) = exec_stdin(
        dir.path(),
        &["--secrets", "redact"],
        &json!({"command": "create", "path": format!("/memories/{GITHUB}.md"), "file_text": "x\n"}),
    );
    assert_eq!(refused["is_error"], true, "{refused}");
    for key in [GITHUB, anthropic, aws] {
        assert_eq!(holding(dir.path(), key), Vec::<String>::new());
    }

    // A person made a directory with a key for its name, on disk: `memfs
    // scan` finds it and never prints it.
    let by_hand = dir.path().join("memories").join(GITHUB);
    std::fs::create_dir_all(&by_hand).unwrap();
    std::fs::write(by_hand.join("notes.md"), "plain\n").unwrap();
    let out = memfs()
        .arg("--data")
        .arg(dir.path())
        .arg("scan")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text,
        "/memories/[REDACTED:github_token]: github_token in the name\n"
    );
    let out = memfs()
        .arg("--data")
        .arg(dir.path())
        .args(["scan", "--json"])
        .output()
        .unwrap();
    let row: serde_json::Value =
        serde_json::from_str(String::from_utf8(out.stdout).unwrap().trim()).unwrap();
    assert_eq!(
        row,
        json!({"path": "/memories/[REDACTED:github_token]", "name": true, "kind": "github_token"})
    );
}
