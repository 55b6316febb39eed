//! The fuzz targets' corpora (`fuzz/corpus/`, grown by `cargo fuzz run` and
//! minimised with `cargo fuzz cmin`), replayed through the same properties
//! the targets check, so that every input the fuzzer once found
//! interesting is checked on every test run, without a nightly compiler.

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let outcome = std::panic::catch_unwind(|| check(&bytes));
        assert!(outcome.is_ok(), "{} fails its properties", path.display());
        count += 1;
    }
    println!("{target}: {count} inputs replayed");
    assert!(
        count >= 5,
        "the {target} corpus is missing ({})",
        dir.display()
    );
}

#[test]
fn the_head_corpus_holds_its_properties() {
    replay("head", agwire_http1::fuzzing::check_head);
}

#[test]
fn the_chunked_corpus_holds_its_properties() {
    replay("chunked", agwire_http1::fuzzing::check_chunked);
}
