//! A real OpenAI-compatible server (transformers' `serve`, from scripts/serve-fixture)
//! on a fixture model, started, killed and restarted by the tests.

use creg::workload::{tokenizer_corpus, SMOKE_VOCAB};
use runner_engine::candle::fixture::{write_fixture_with, Arch, Size};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("creg-served-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The fixture model every served test uses: Tiny qwen2 with a tokenizer trained on the
/// suite's prompts (the smoke run's model), written once per test process.
pub fn fixture() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("fixture").join("fixture-qwen2");
        let corpus = tokenizer_corpus().expect("the tokenizer corpus");
        write_fixture_with(Arch::Qwen2, Size::Tiny, &dir, Some((corpus, SMOKE_VOCAB)))
            .expect("writing the fixture model");
        dir
    })
}

/// The model's name on the server: `serve` names a local model by its path.
pub fn served_name() -> String {
    fixture().display().to_string()
}

pub struct Server {
    child: Option<Child>,
    pub port: u16,
    log: PathBuf,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Server {
    pub fn start() -> Server {
        Server::start_on(free_port())
    }

    /// Starts `serve` on `port` and waits until `/v1/models` answers.
    pub fn start_on(port: u16) -> Server {
        let bin = std::env::var("CREG_SERVE_BIN").unwrap_or_else(|_| {
            panic!(
                "CREG_SERVE_BIN is not set: the served tests need a real server program; \
                 run them through `scripts/serve-fixture cargo test --test served` (set \
                 CREG_SERVE_VENV to an existing venv with transformers[serving] to skip the install)"
            )
        });
        let log = std::env::temp_dir().join(format!(
            "creg-served-{}-server-{port}.log",
            std::process::id()
        ));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(&bin)
            .args([
                "serve",
                &served_name(),
                "--device",
                "cpu",
                "--host",
                "127.0.0.1",
            ])
            .args(["--port", &port.to_string()])
            .env("OMP_NUM_THREADS", "1")
            .env("HF_HUB_OFFLINE", "1")
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {bin} serve: {e}"));
        let mut s = Server {
            child: Some(child),
            port,
            log,
        };
        s.wait_ready(Duration::from_secs(240));
        s
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn wait_ready(&mut self, limit: Duration) {
        let started = Instant::now();
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(2))
            .build();
        while started.elapsed() < limit {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!(
                    "the server exited ({status}) before answering; its log:\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            if agent.get(&format!("{}/models", self.url())).call().is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "the server did not answer /v1/models within {limit:?}; its log:\n{}",
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }

    /// Kills the server at once (SIGKILL): a crash, not a shutdown.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}
