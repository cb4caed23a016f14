//! A real headless Chromium driven over the DevTools protocol
//! (chromiumoxide): load a page, run script in it, wait for what a visitor
//! would see, take screenshots.

use std::time::Duration;

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::page::{Page, ScreenshotParams};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;

/// How long a page may take to show what a step waits for before the test
/// fails (a guard against hanging, not a measure of speed).
const PATIENCE: Duration = Duration::from_secs(20);

pub struct Chrome {
    browser: Browser,
    handler: tokio::task::JoinHandle<()>,
    _profile: tempfile::TempDir,
}

impl Chrome {
    pub async fn launch() -> Chrome {
        let profile = tempfile::tempdir().expect("profile dir");
        let config = BrowserConfig::builder()
            .chrome_executable(super::browser::chromium())
            .no_sandbox()
            .user_data_dir(profile.path())
            .window_size(1280, 800)
            .viewport(None)
            .args([
                "--disable-gpu",
                "--disable-quic",
                "--disable-component-update",
                "--no-proxy-server",
            ])
            .launch_timeout(Duration::from_secs(60))
            .build()
            .expect("browser config");
        let (browser, mut events) = Browser::launch(config).await.expect("launch Chromium");
        let handler = tokio::spawn(async move { while events.next().await.is_some() {} });
        Chrome {
            browser,
            handler,
            _profile: profile,
        }
    }

    /// A new tab showing `url`, sized `width` × `height` CSS pixels.
    pub async fn open(&self, url: &str, width: i64, height: i64) -> Tab {
        let page = self.browser.new_page("about:blank").await.expect("new tab");
        page.execute(SetDeviceMetricsOverrideParams::new(
            width, height, 1.0, false,
        ))
        .await
        .expect("viewport");
        page.goto(url).await.expect("navigate");
        Tab { page }
    }

    pub async fn close(mut self) {
        let _ = self.browser.close().await;
        let _ = self.browser.wait().await;
        self.handler.abort();
    }
}

pub struct Tab {
    page: Page,
}

impl Tab {
    /// Closes the tab, and with it its connections (a browser keeps at most
    /// six to one host, and each open widget holds its live stream).
    pub async fn close(self) {
        let _ = self.page.close().await;
    }

    /// The value of a script expression (a promise is awaited).
    pub async fn eval<T: DeserializeOwned>(&self, js: &str) -> T {
        let params = EvaluateParams::builder()
            .expression(js)
            .await_promise(true)
            .return_by_value(true)
            .build()
            .expect("evaluate params");
        let r = self
            .page
            .evaluate_expression(params)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{js}"));
        // `undefined` has no value: read as null.
        let v = r.value().cloned().unwrap_or(serde_json::Value::Null);
        serde_json::from_value(v).unwrap_or_else(|e| panic!("script result: {e}\n{js}"))
    }

    /// Lets the test's own scripts read what the page's Content-Security-
    /// Policy keeps from them (a `blob:` URL the page made), then loads the
    /// page again.
    pub async fn bypass_csp_and_reload(&self) {
        use chromiumoxide::cdp::browser_protocol::page::SetBypassCspParams;
        self.page
            .execute(SetBypassCspParams::new(true))
            .await
            .expect("bypass CSP");
        self.page.reload().await.expect("reload");
    }

    /// Waits until `js` is truthy; fails with `what` and the page's state.
    pub async fn wait_for(&self, js: &str, what: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let ok: bool = self.eval(&format!("Boolean({js})")).await;
            if ok {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                let state: String = self.eval(DUMP).await;
                panic!("{what}: not seen within {PATIENCE:?}\n{state}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Cuts the tab off the network (open connections included), or
    /// brings it back.
    pub async fn set_offline(&self, offline: bool) {
        use chromiumoxide::cdp::browser_protocol::network::{
            EmulateNetworkConditionsByRuleParams, EnableParams, NetworkConditions,
        };
        self.page
            .execute(EnableParams::default())
            .await
            .expect("network domain");
        // Every request (an empty pattern), no throttling.
        let all = NetworkConditions::new("", 0.0, -1.0, -1.0);
        self.page
            .execute(EmulateNetworkConditionsByRuleParams::new(
                offline,
                vec![all],
            ))
            .await
            .expect("network conditions");
    }

    /// Presses and releases the Tab key, as a keyboard would.
    pub async fn press_tab(&self) {
        use chromiumoxide::cdp::browser_protocol::input::{
            DispatchKeyEventParams, DispatchKeyEventType,
        };
        for kind in [
            DispatchKeyEventType::RawKeyDown,
            DispatchKeyEventType::KeyUp,
        ] {
            let p = DispatchKeyEventParams::builder()
                .r#type(kind)
                .key("Tab")
                .code("Tab")
                .windows_virtual_key_code(9)
                .native_virtual_key_code(9)
                .build()
                .expect("key event");
            self.page.execute(p).await.expect("key event");
        }
    }

    pub async fn screenshot(&self) -> Vec<u8> {
        self.page
            .screenshot(ScreenshotParams::builder().build())
            .await
            .expect("screenshot")
    }
}

/// The page's HTML with every open shadow root's content.
pub const DUMP: &str = r#"(() => {
  const walk = (root) => [...root.querySelectorAll("*")]
    .filter((e) => e.shadowRoot)
    .map((e) => `<#shadow ${e.tagName}>` + e.shadowRoot.innerHTML + walk(e.shadowRoot).join(""));
  return document.documentElement.outerHTML + walk(document).join("");
})()"#;
