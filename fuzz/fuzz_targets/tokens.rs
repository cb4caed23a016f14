//! The token parser and the other texts taken from the outside: a
//! response_url token, a cursor, a duration, a limit, a webhook URL.
#![no_main]

use blockhook::domain::{duration, token::TokenKey};
use blockhook::limits::Rate;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let key = TokenKey::new(b"fuzz key");
    if let Some(g) = key.verify(text) {
        // Only this key's own tokens verify, and they round-trip.
        assert_eq!(key.verify(&key.issue(&g)), Some(g));
    }
    let _ = key.open_cursor("events:cb_1", text);
    let _ = duration::parse(text);
    let _ = Rate::parse(text);
    let _ = blockhook::delivery::ssrf::parse_url(text);
});
