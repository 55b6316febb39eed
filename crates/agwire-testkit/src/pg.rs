//! A PostgreSQL database of one test: created on the server at
//! `AGWIRE_TEST_PG_URL` (default: this machine's), dropped with the value.
//! Without a reachable server the test skips loudly — or fails under
//! `AGWIRE_REQUIRE_PG=1`, as the test command sets it. Shared by the
//! service's and the binary's tests (feature `pg`).

/// The PostgreSQL server the tests use (`AGWIRE_TEST_PG_URL`, a database
/// the user may create databases from).
fn pg_admin_url() -> String {
    std::env::var("AGWIRE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// A database of one test, dropped when this is.
#[derive(Debug)]
pub struct PgDatabase {
    name: String,
    /// Its URL.
    pub url: String,
}

impl PgDatabase {
    /// A fresh database, or `None` (announced) without a reachable server —
    /// a failure instead under `AGWIRE_REQUIRE_PG=1`.
    pub async fn create() -> Option<Self> {
        use sqlx::Connection;
        let admin = pg_admin_url();
        let mut connection = match sqlx::PgConnection::connect(&admin).await {
            Ok(connection) => connection,
            Err(error) => {
                let why = format!("PostgreSQL not reachable at {admin}: {error}");
                assert!(
                    std::env::var("AGWIRE_REQUIRE_PG").as_deref() != Ok("1"),
                    "{why} (AGWIRE_REQUIRE_PG=1)"
                );
                eprintln!("\n!!!!! SKIPPED the PostgreSQL backend: {why} !!!!!\n");
                return None;
            }
        };
        drop_stale(&mut connection).await;
        let name = format!(
            "agwire_test_{}_{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut connection)
            .await
            .unwrap();
        let base = admin
            .rsplit_once('/')
            .map_or(admin.as_str(), |(base, _)| base);
        let url = format!("{base}/{name}");
        Some(Self { name, url })
    }
}

impl PgDatabase {
    /// Keeps the database past this value (a server that outlives the
    /// test's handle on it); a later test process drops it.
    pub fn keep(self) -> String {
        let url = self.url.clone();
        std::mem::forget(self);
        url
    }
}

/// Drops the databases of test processes that are gone (kept ones, or ones
/// a crashed test left).
async fn drop_stale(connection: &mut sqlx::PgConnection) {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT datname FROM pg_database WHERE datname LIKE 'agwire\\_test\\_%'",
    )
    .fetch_all(&mut *connection)
    .await
    .unwrap_or_default();
    for name in names {
        let pid = name.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
        let alive = pid.is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
            )))
            .execute(&mut *connection)
            .await;
        }
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let (admin, name) = (pg_admin_url(), self.name.clone());
        // A runtime of its own: drop runs inside the test's.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                use sqlx::Connection;
                let mut connection = sqlx::PgConnection::connect(&admin).await?;
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .execute(&mut connection)
                .await
                .map(|_| ())
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test database {}", self.name);
        }
    }
}
