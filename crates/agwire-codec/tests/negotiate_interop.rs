//! `Accept` negotiation against the official encoder: for every header, our
//! [`Negotiator`] picks the format `new EventEncoder({accept}).getContentType()`
//! of `@ag-ui/encoder` picks — on a table of hand-picked headers and on
//! thousands of generated ones built from the parser's sharp edges.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use crate::common;

use agwire_codec::negotiate::{Negotiator, PROTO_CONTENT_TYPE, SSE_CONTENT_TYPE, WireFormat};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const SEED: u64 = 0xACCE_7001;

/// Digest §3.4's cases and the tricky ones.
const TABLE: &[&str] = &[
    "",
    "text/event-stream",
    "*/*",
    "application/*",
    "text/*",
    "text/event-stream, application/vnd.ag-ui.event+proto",
    "application/vnd.ag-ui.event+proto",
    "application/vnd.ag-ui.event+proto;q=0, */*",
    "application/vnd.ag-ui.event+proto;q=0",
    "application/vnd.ag-ui.event+proto;q=0.0",
    "application/vnd.ag-ui.event+proto;q=0.001",
    "application/vnd.ag-ui.event+proto;q=0.000",
    "application/vnd.ag-ui.event+proto; q=0.5",
    "application/vnd.ag-ui.event+proto;Q=0",
    "application/vnd.ag-ui.event+proto;q = 0",
    "application/vnd.ag-ui.event+proto;q=abc",
    "application/vnd.ag-ui.event+proto;q=-1",
    "application/vnd.ag-ui.event+proto;q=\"0\"",
    "application/vnd.ag-ui.event+proto;q=\"0.5",
    "application/vnd.ag-ui.event+proto;charset=utf-8",
    "application/vnd.ag-ui.event+proto;charset=*",
    "application/vnd.ag-ui.event+proto;charset=",
    "application/vnd.ag-ui.event+proto;charset=\"*\"",
    "application/vnd.ag-ui.event+proto;foo=\"a,b\";q=0, */*",
    "application/vnd.ag-ui.event+proto;a=1;a=*",
    "application/vnd.ag-ui.event+proto;a=*;a=1",
    "text/html;a=\"x, application/vnd.ag-ui.event+proto;b=\"",
    "*/*;q=0, application/vnd.ag-ui.event+proto",
    "*/*;q=0",
    "application/*;q=0",
    "application/*;q=0, */*",
    "application/*;q=0.5, application/vnd.ag-ui.event+proto;q=0",
    "application/vnd.ag-ui.event+proto;q=0, application/vnd.ag-ui.event+proto",
    "application/vnd.ag-ui.event+proto, application/vnd.ag-ui.event+proto;q=0",
    "application/vnd.ag-ui.event+proto;q=0.5, application/vnd.ag-ui.event+proto;q=0",
    "application/vnd.ag-ui.event+proto;x=1;q=0, application/vnd.ag-ui.event+proto",
    "APPLICATION/VND.AG-UI.EVENT+PROTO",
    "Application/*",
    "  application/vnd.ag-ui.event+proto  ",
    "\tapplication/vnd.ag-ui.event+proto\t;\tq=0",
    "application/vnd.ag-ui.event+proto\n;q=0",
    "application/vnd.ag-ui.event+proto;a=\n;q=0",
    "application/vnd.ag-ui.event+proto;a=\u{2028}",
    "\u{feff}application/vnd.ag-ui.event+proto",
    "\u{a0}*/*\u{a0}",
    "application /vnd.ag-ui.event+proto",
    "application/ vnd.ag-ui.event+proto",
    "application/vnd.ag-ui.event+proto extra",
    "application/vnd.ag-ui.event+proto/extra",
    "application/vnd.ag-ui.event+proto,",
    ",application/vnd.ag-ui.event+proto",
    ",,,",
    ";",
    "garbage",
    "/",
    "*",
    "*/",
    "/*",
    "\"*/*\"",
    "*/*, text/event-stream;q=1",
    "text/event-stream;q=1, */*;q=0.1",
    "text/html, application/xhtml+xml, application/xml;q=0.9, */*;q=0.8",
    "application/json, text/plain, */*",
    "*/*;q=NaN",
    "*/*;q=1e-9",
    "*/*;q=1e",
    "*/*;q=.5",
    "*/*;q=5.",
    "*/*;q=-0",
    "*/*;q=Infinity",
    "*/*;q=0x1",
    "*/*;q= 1",
    "*/*;q=",
    "*/*;q",
];

#[test]
fn table_matches_the_official_encoder() {
    let Some(dir) = common::interop_dir() else {
        return;
    };
    let headers: Vec<String> = TABLE.iter().map(|h| (*h).to_owned()).collect();
    let n = compare(&dir, &headers);
    assert_eq!(Negotiator::default().choose(None), WireFormat::Sse);
    println!("negotiation: {n} hand-picked Accept headers, same choice as @ag-ui/encoder");
}

#[test]
fn generated_headers_match_the_official_encoder() {
    let Some(dir) = common::interop_dir() else {
        return;
    };
    let seed = std::env::var("AGWIRE_NEGOTIATE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEED);
    println!("negotiation: seed {seed:#x} (AGWIRE_NEGOTIATE_SEED to change)");
    let mut rng = StdRng::seed_from_u64(seed);
    let headers: Vec<String> = (0..4000).map(|_| header(&mut rng)).collect();
    let total = compare(&dir, &headers);
    // The generator must reach both answers often, or the comparison says little.
    let chosen = headers
        .iter()
        .filter(|h| Negotiator::default().choose(Some(h)) == WireFormat::Protobuf)
        .count();
    assert!(
        chosen > 400 && chosen < 3600,
        "{chosen} of {total} headers chose protobuf: the generator is lopsided"
    );
    println!(
        "negotiation: {} generated Accept headers ({chosen} protobuf), same choice as @ag-ui/encoder",
        headers.len()
    );
}

/// Asks the official encoder about every header and checks we agree; also
/// checks the curl-friendly mode never answers protobuf where the official
/// encoder would not, nor without the protobuf subtype named. Returns how many
/// headers were compared.
fn compare(dir: &std::path::Path, headers: &[String]) -> usize {
    let jobs: Vec<Value> = headers.iter().map(|h| json!({ "accept": h })).collect();
    let answers = common::node(dir, "negotiate", &jobs);
    let official = Negotiator::default();
    let curl = Negotiator::default().prefer_sse_for_wildcards(true);
    let mut mismatches = Vec::new();
    for (h, a) in headers.iter().zip(&answers) {
        let theirs = a["contentType"].as_str().expect("contentType");
        assert!(theirs == SSE_CONTENT_TYPE || theirs == PROTO_CONTENT_TYPE);
        let ours = official.choose(Some(h));
        if ours.content_type() != theirs {
            mismatches.push(format!("{h:?}: ours {ours:?}, theirs {theirs}"));
        }
        if curl.choose(Some(h)) == WireFormat::Protobuf {
            assert_eq!(ours, WireFormat::Protobuf, "curl-friendly, {h:?}");
            assert!(
                h.to_lowercase().contains("vnd.ag-ui.event+proto"),
                "curl-friendly chose protobuf for {h:?}"
            );
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} headers disagree with @ag-ui/encoder:\n{}",
        mismatches.len(),
        headers.len(),
        mismatches.join("\n")
    );
    headers.len()
}

/// A random `Accept` header assembled from the pieces the negotiator treats
/// specially: case, wildcards, whitespace of every kind JavaScript trims,
/// quoted commas and semicolons, repeated parameters, odd `q` spellings.
fn header(rng: &mut StdRng) -> String {
    if rng.random_ratio(1, 10) {
        // Plain noise over the grammar's alphabet.
        const ALPHABET: &[char] = &[
            'a', 'p', '/', '*', ';', '=', '"', ',', ' ', '\t', 'q', '0', '1', '.', 'x',
        ];
        let len = rng.random_range(0..24);
        return (0..len).map(|_| *ALPHABET.choose(rng).unwrap()).collect();
    }
    let ranges = rng.random_range(1..=4);
    let mut out = String::new();
    for i in 0..ranges {
        if i > 0 {
            out.push_str(pick(rng, &[",", ", ", " ,", ",,", ",\t", ", ,"]));
        }
        out.push_str(pick(rng, SPACE));
        if rng.random_bool(0.5) {
            // A range that admits protobuf unless its parameters say otherwise.
            out.push_str(pick(rng, &["application", "APPLICATION", "*"]));
            out.push('/');
            out.push_str(pick(
                rng,
                &["vnd.ag-ui.event+proto", "Vnd.Ag-Ui.Event+Proto", "*"],
            ));
        } else {
            out.push_str(pick(
                rng,
                &[
                    "application",
                    "*",
                    "text",
                    "image",
                    "",
                    "appl\"ication",
                    "a p",
                ],
            ));
            out.push_str(pick(rng, &["/", "/", " /", "/ ", ";"]));
            out.push_str(pick(
                rng,
                &[
                    "vnd.ag-ui.event+proto",
                    "*",
                    "event-stream",
                    "json",
                    "vnd.ag-ui.event+protox",
                    "vnd.ag-ui.event+proto/x",
                    "",
                ],
            ));
        }
        for _ in 0..rng.random_range(0..=3) {
            out.push_str(pick(rng, SPACE));
            out.push(';');
            out.push_str(pick(rng, SPACE));
            out.push_str(pick(
                rng,
                &[
                    "q=", "q=", "q=", "Q=", "q =", "q= ", "charset=", "a=", "a=", "b=", "q", "",
                ],
            ));
            out.push_str(pick(
                rng,
                &[
                    "0",
                    "0",
                    "1",
                    "0.0",
                    "0.001",
                    "1e-3",
                    ".5",
                    "5.",
                    "abc",
                    "-1",
                    "\"0\"",
                    "\"0.5\"",
                    "\"",
                    "",
                    "*",
                    "\"*\"",
                    "utf-8",
                    "NaN",
                    "Infinity",
                    "1e400",
                    "+0.1",
                    "\"x,y\"",
                    "\"x;q=0\"",
                    "\"x, application/vnd.ag-ui.event+proto",
                ],
            ));
        }
        out.push_str(pick(rng, SPACE));
    }
    out
}

/// Mostly nothing; otherwise a character `\s` and `trim` treat as space.
const SPACE: &[&str] = &[
    "", "", "", "", "", "", " ", " ", "\t", "  ", "\u{a0}", "\u{feff}", "\u{2028}", "\n", "\r",
    "\u{3000}", "\u{85}",
];

fn pick<'a>(rng: &mut StdRng, options: &[&'a str]) -> &'a str {
    options.choose(rng).unwrap()
}
