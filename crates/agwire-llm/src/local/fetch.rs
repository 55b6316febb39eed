//! `hf:OWNER/REPO/FILE.gguf`: a model file fetched once from a Hugging
//! Face-style hub into a cache directory, then used offline.
//!
//! The hub's protocol, as `huggingface_hub` speaks it: `HEAD
//! {endpoint}/{owner}/{repo}/resolve/main/{file}` without following the
//! redirect gives the file's SHA-256 (`X-Linked-Etag`, or `ETag` for a file
//! served directly) and size; `GET` (redirects followed) gives the bytes,
//! from where an earlier attempt stopped (`Range`). The file becomes
//! visible under its name only once its SHA-256 matches.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::error::Error;

/// The hub `hf:` names refer to, unless `AGWIRE_HF_ENDPOINT` says another.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// A file on the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubFile {
    /// The repository (`OWNER/REPO`).
    pub repo: String,
    /// The file's path in it.
    pub file: String,
}

impl HubFile {
    /// `hf:OWNER/REPO/FILE` (the file may sit in folders); `None` for
    /// anything else (a local path).
    pub fn parse(spec: &str) -> Option<Result<Self, Error>> {
        let rest = spec.strip_prefix("hf:")?;
        let mut parts = rest.splitn(3, '/');
        let (Some(owner), Some(repo), Some(file)) = (parts.next(), parts.next(), parts.next())
        else {
            return Some(Err(bad(spec)));
        };
        let safe = |s: &str| {
            !s.is_empty()
                && s != "."
                && s != ".."
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        };
        if !safe(owner) || !safe(repo) || !file.split('/').all(safe) {
            return Some(Err(bad(spec)));
        }
        Some(Ok(Self {
            repo: format!("{owner}/{repo}"),
            file: file.to_owned(),
        }))
    }

    /// Where it lives in `cache`.
    pub fn cached(&self, cache: &Path) -> PathBuf {
        cache.join(&self.repo).join(&self.file)
    }
}

fn bad(spec: &str) -> Error {
    Error::Local(format!(
        "'{spec}' is not hf:OWNER/REPO/FILE.gguf (letters, digits, - _ . in each part)"
    ))
}

/// What a download reports as it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes on disk.
    pub done: u64,
    /// The file's size.
    pub total: u64,
}

/// The cached file, downloaded first if it is not there yet (resuming a
/// partial download). `token`: a hub access token, for gated models.
pub async fn fetch(
    file: &HubFile,
    cache: &Path,
    endpoint: &str,
    token: Option<&str>,
    mut progress: impl FnMut(Progress) + Send,
) -> Result<PathBuf, Error> {
    let target = file.cached(cache);
    if target.is_file() {
        return Ok(target);
    }
    let dir = target
        .parent()
        .ok_or_else(|| Error::Local("model cache has no folder".into()))?;
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|e| Error::Local(format!("{}: {e}", dir.display())))?;
    let url = format!(
        "{}/{}/resolve/main/{}",
        endpoint.trim_end_matches('/'),
        file.repo,
        file.file
    );
    let transport = |e: reqwest::Error| Error::Transport(format!("{url}: {e}"));
    let builder = || {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(15))
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("agwire/", env!("CARGO_PKG_VERSION")))
    };
    let head_client = builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(transport)?;
    let client = builder().build().map_err(transport)?;
    let authorized = |request: reqwest::RequestBuilder| match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    };

    let head = authorized(head_client.head(&url))
        .send()
        .await
        .map_err(transport)?;
    let status = head.status();
    if !(status.is_success() || status.is_redirection()) {
        return Err(Error::Http {
            status: status.as_u16(),
            message: format!("{url}: the hub has no such file"),
        });
    }
    let header = |name: &str| {
        head.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim_start_matches("W/").trim_matches('"').to_owned())
    };
    let sha256 = header("x-linked-etag")
        .or_else(|| header("etag"))
        .filter(|tag| tag.len() == 64 && tag.chars().all(|c| c.is_ascii_hexdigit()))
        .ok_or_else(|| {
            Error::Local(format!(
                "{url}: the hub gave no SHA-256 of the file; it cannot be verified"
            ))
        })?
        .to_ascii_lowercase();
    let total = header("x-linked-size")
        .or_else(|| header("content-length"))
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| Error::Local(format!("{url}: the hub gave no size of the file")))?;

    let partial = target.with_extension(format!(
        "{}.part",
        target
            .extension()
            .map(|e| e.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    let mut have = tokio::fs::metadata(&partial)
        .await
        .map(|m| m.len())
        .unwrap_or(0);
    if have > total {
        have = 0;
    }
    if have < total {
        let mut request = authorized(client.get(&url));
        if have > 0 {
            request = request.header(reqwest::header::RANGE, format!("bytes={have}-"));
        }
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let append = match status.as_u16() {
            206 => true,
            // The server ignored the range: from the start.
            200 => false,
            code => {
                return Err(Error::Http {
                    status: code,
                    message: format!("{url}: download refused"),
                });
            }
        };
        if !append {
            have = 0;
        }
        let mut out = tokio::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(&partial)
            .await
            .map_err(|e| Error::Local(format!("{}: {e}", partial.display())))?;
        let mut body = response.bytes_stream();
        let step = (total / 20).max(1);
        let mut next_report = have + step;
        progress(Progress { done: have, total });
        let mut broken = None;
        while let Some(chunk) = body.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(e) => {
                    broken = Some(Error::Transport(format!(
                        "{url}: the download broke off at {have} of {total} bytes ({e}); run again to resume"
                    )));
                    break;
                }
            };
            out.write_all(&chunk)
                .await
                .map_err(|e| Error::Local(format!("{}: {e}", partial.display())))?;
            have += chunk.len() as u64;
            if have >= next_report || have == total {
                progress(Progress { done: have, total });
                next_report = have + step;
            }
        }
        // Also when the download broke off: tokio's `File` finishes a write
        // in the background, and the next attempt resumes from the partial
        // file's length, so every byte counted in `have` must be on disk
        // before this attempt reports where it stopped.
        out.flush()
            .await
            .map_err(|e| Error::Local(format!("{}: {e}", partial.display())))?;
        if let Some(error) = broken {
            return Err(error);
        }
    }
    let digest = {
        let partial = partial.clone();
        tokio::task::spawn_blocking(move || sha256_of(&partial))
            .await
            .map_err(|e| Error::Local(e.to_string()))??
    };
    if digest != sha256 {
        let _ = tokio::fs::remove_file(&partial).await;
        return Err(Error::Local(format!(
            "{url}: the file's SHA-256 is {digest}, the hub says {sha256}; the download was discarded"
        )));
    }
    tokio::fs::rename(&partial, &target)
        .await
        .map_err(|e| Error::Local(format!("{}: {e}", target.display())))?;
    Ok(target)
}

fn sha256_of(path: &Path) -> Result<String, Error> {
    use std::io::Read;
    let mut file =
        std::fs::File::open(path).map_err(|e| Error::Local(format!("{}: {e}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buffer)
            .map_err(|e| Error::Local(format!("{}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_names_are_parsed_and_paths_that_escape_refused() {
        let ok = HubFile::parse("hf:HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/q4/model.gguf");
        assert_eq!(
            ok.and_then(Result::ok),
            Some(HubFile {
                repo: "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF".into(),
                file: "q4/model.gguf".into()
            })
        );
        assert!(HubFile::parse("./model.gguf").is_none());
        for bad in [
            "hf:a/b",
            "hf:a/b/../../etc/passwd",
            "hf:a/b/c d.gguf",
            "hf:../b/c",
        ] {
            assert!(matches!(HubFile::parse(bad), Some(Err(_))), "{bad}");
        }
    }
}
