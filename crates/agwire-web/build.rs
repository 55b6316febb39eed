//! Embeds `web/dist` (the committed build of `web/`): one table entry per
//! file with its route, content type, ETag (SHA-256 of the bytes) and, for
//! text that compresses, a gzip copy made here once rather than per request.

use std::error::Error;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::Digest as _;

/// Files below this size are served as they are: gzip would save nothing.
const GZIP_MIN: usize = 512;

fn main() -> Result<(), Box<dyn Error>> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let dist = manifest.join("../../web/dist");
    println!("cargo::rerun-if-changed={}", dist.display());
    if !dist.join("index.html").is_file() {
        return Err(format!(
            "{} has no index.html: the web app is committed built; run `npm ci && npm run build` in web/",
            dist.display()
        )
        .into());
    }
    let mut files = Vec::new();
    walk(&dist, &mut files)?;
    files.sort();
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let gz_dir = out.join("gz");
    std::fs::create_dir_all(&gz_dir)?;
    let mut table = String::from("static ASSETS: &[Asset] = &[\n");
    for (i, path) in files.iter().enumerate() {
        let relative = path.strip_prefix(&dist)?;
        let route = format!(
            "/{}",
            relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        );
        let bytes = std::fs::read(path)?;
        let (content_type, compressible) = content_type(path);
        let digest = sha2::Sha256::digest(&bytes);
        let etag: String = digest[..10].iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        });
        let gzip = if compressible && bytes.len() >= GZIP_MIN {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            encoder.write_all(&bytes)?;
            let packed = encoder.finish()?;
            if packed.len() < bytes.len() {
                let file = gz_dir.join(format!("{i}.gz"));
                std::fs::write(&file, packed)?;
                format!("Some(include_bytes!({:?}))", file.display().to_string())
            } else {
                "None".to_owned()
            }
        } else {
            "None".to_owned()
        };
        writeln!(
            table,
            "    Asset {{ route: {route:?}, content_type: {content_type:?}, etag: \"\\\"{etag}\\\"\", \
             immutable: {immutable}, body: include_bytes!({path:?}), gzip: {gzip} }},",
            immutable = route.starts_with("/assets/"),
            path = path.display().to_string(),
        )?;
    }
    table.push_str("];\n");
    std::fs::write(out.join("assets.rs"), table)?;
    Ok(())
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), Box<dyn Error>> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

/// The type a browser needs, and whether gzip helps it.
fn content_type(path: &Path) -> (&'static str, bool) {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => ("text/html; charset=utf-8", true),
        "js" | "mjs" => ("text/javascript; charset=utf-8", true),
        "css" => ("text/css; charset=utf-8", true),
        "json" | "map" => ("application/json", true),
        "svg" => ("image/svg+xml", true),
        "txt" => ("text/plain; charset=utf-8", true),
        "webmanifest" => ("application/manifest+json", true),
        "png" => ("image/png", false),
        "jpg" | "jpeg" => ("image/jpeg", false),
        "gif" => ("image/gif", false),
        "webp" => ("image/webp", false),
        "ico" => ("image/x-icon", false),
        "woff2" => ("font/woff2", false),
        _ => ("application/octet-stream", false),
    }
}
