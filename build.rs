//! Prepares the pages' static files (`assets/`) for serving: every script,
//! stylesheet and image gets a content-hashed name (`main.3f2a9c1b04.js`)
//! that can be cached for a year, the references between files (module
//! imports, `/assets/…` paths in pages and scripts) are rewritten to those
//! names, and each text file is compressed once here, with gzip and
//! Brotli, so a request only picks the encoding. `src/http/assets.rs`
//! includes the table this writes to `$OUT_DIR/assets.rs`.
//!
//! The launcher `/widget.js` also gets the list of the panel's modules
//! (where it says `/* panel-modules */ []`), so it fetches them all at once
//! on first open instead of one import level after another.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const PANEL_ENTRY: &str = "widget/main.js";
const PANEL_MARK: &str = "/* panel-modules */ []";

struct File {
    text: Option<String>,
    bytes: Vec<u8>,
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let assets = root.join("assets");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed=assets");

    let mut files = BTreeMap::new();
    walk(&assets, &assets, &mut files);
    let names: BTreeSet<String> = files.keys().cloned().collect();

    // What each file refers to, and the order in which every file's
    // references are hashed before the file itself.
    let deps: BTreeMap<String, BTreeSet<String>> = files
        .iter()
        .map(|(name, f)| {
            let refs = f
                .text
                .as_deref()
                .map(|t| references(name, t, &names))
                .unwrap_or_default();
            (name.clone(), refs.into_iter().map(|r| r.target).collect())
        })
        .collect();
    let order = topological(&deps);

    let mut hashed: BTreeMap<String, String> = BTreeMap::new();
    let mut content: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for name in &order {
        let f = &files[name];
        let bytes = match &f.text {
            Some(t) => {
                let mut t = rewrite(name, t, &names, &hashed);
                if name == "widget.js" && t.contains(PANEL_MARK) {
                    let list: Vec<String> = closure(PANEL_ENTRY, &deps)
                        .iter()
                        .map(|m| format!("\"/assets/{}\"", hashed[m]))
                        .collect();
                    t = t.replace(PANEL_MARK, &format!("[{}]", list.join(", ")));
                }
                t.into_bytes()
            }
            None => f.bytes.clone(),
        };
        let digest = Sha256::digest(&bytes);
        let hex: String = digest[..5].iter().map(|b| format!("{b:02x}")).collect();
        hashed.insert(name.clone(), hashed_name(name, &hex));
        content.insert(name.clone(), bytes);
    }

    let mut table = String::from("&[\n");
    for name in &order {
        let bytes = &content[name];
        let etag: String = Sha256::digest(bytes)[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let flat = name.replace('/', "__");
        let raw = out.join(format!("asset-{flat}"));
        std::fs::write(&raw, bytes).expect("write asset");
        let (mut gz, mut br) = (None, None);
        if files[name].text.is_some() && bytes.len() > 256 {
            let g = gzip(bytes);
            if g.len() < bytes.len() {
                let p = out.join(format!("asset-{flat}.gz"));
                std::fs::write(&p, g).expect("write gzip");
                gz = Some(p);
            }
            let b = brotli(bytes);
            if b.len() < bytes.len() {
                let p = out.join(format!("asset-{flat}.br"));
                std::fs::write(&p, b).expect("write brotli");
                br = Some(p);
            }
        }
        let inc = |p: &Option<PathBuf>| match p {
            Some(p) => format!("Some(include_bytes!({:?}))", p.display().to_string()),
            None => "None".into(),
        };
        let _ = writeln!(
            table,
            "    Asset {{ name: {name:?}, hashed: {:?}, etag: {etag:?}, raw: include_bytes!({:?}), gzip: {}, brotli: {} }},",
            hashed[name],
            raw.display().to_string(),
            inc(&gz),
            inc(&br),
        );
    }
    table.push(']');
    std::fs::write(out.join("assets.rs"), table).expect("write assets.rs");
}

fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, File>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read assets")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(base, &p, out);
            continue;
        }
        let name = p
            .strip_prefix(base)
            .expect("under assets")
            .to_string_lossy()
            .replace('\\', "/");
        let bytes = std::fs::read(&p).expect("read asset");
        let text = matches!(ext(&name), "js" | "css" | "html" | "svg" | "json")
            .then(|| String::from_utf8(bytes.clone()).expect("text assets are UTF-8"));
        out.insert(name, File { text, bytes });
    }
}

fn ext(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or("")
}

/// `widget/main.js` + `3f2a9c1b04` → `widget/main.3f2a9c1b04.js`.
fn hashed_name(name: &str, hex: &str) -> String {
    match name.rfind('.') {
        Some(i) if !name[i..].contains('/') => format!("{}.{hex}{}", &name[..i], &name[i..]),
        _ => format!("{name}.{hex}"),
    }
}

/// One reference in a file: the byte range of the text to replace, the
/// file it names, and whether it is written relative (`./api.js`).
struct Ref {
    start: usize,
    end: usize,
    target: String,
    relative: bool,
}

/// Module specifiers (`from "./x.js"`, `import("../x.js")`) and absolute
/// `/assets/<file>` paths ending at a quote, backtick or parenthesis.
fn references(name: &str, text: &str, names: &BTreeSet<String>) -> Vec<Ref> {
    let mut refs = Vec::new();
    if ext(name) == "js" {
        for opener in ["from \"", "import(\"", "import \""] {
            let mut at = 0;
            while let Some(i) = text[at..].find(opener) {
                let start = at + i + opener.len();
                at = start;
                let Some(len) = text[start..].find('"') else {
                    break;
                };
                let spec = &text[start..start + len];
                if (spec.starts_with("./") || spec.starts_with("../"))
                    && let Some(target) = resolve(name, spec).filter(|t| names.contains(t))
                {
                    refs.push(Ref {
                        start,
                        end: start + len,
                        target,
                        relative: true,
                    });
                }
            }
        }
    }
    let mut at = 0;
    while let Some(i) = text[at..].find("/assets/") {
        let start = at + i + "/assets/".len();
        at = start;
        let len = text[start..]
            .find(['"', '\'', '`', ')', ' ', '\n'])
            .unwrap_or(text.len() - start);
        let path = &text[start..start + len];
        if names.contains(path) {
            refs.push(Ref {
                start,
                end: start + len,
                target: path.to_string(),
                relative: false,
            });
        }
    }
    refs.sort_by_key(|r| r.start);
    refs
}

/// `widget/widget.js` + `../lib/dom.js` → `lib/dom.js`.
fn resolve(from: &str, spec: &str) -> Option<String> {
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for seg in spec.split('/') {
        match seg {
            "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

fn rewrite(
    name: &str,
    text: &str,
    names: &BTreeSet<String>,
    hashed: &BTreeMap<String, String>,
) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut last = 0;
    for r in references(name, text, names) {
        out.push_str(&text[last..r.start]);
        let new = &hashed[&r.target];
        if r.relative {
            // Same folder layout: only the last segment changes.
            let spec = &text[r.start..r.end];
            let dir = &spec[..spec.rfind('/').map_or(0, |i| i + 1)];
            let file = &new[new.rfind('/').map_or(0, |i| i + 1)..];
            out.push_str(dir);
            out.push_str(file);
        } else {
            out.push_str(new);
        }
        last = r.end;
    }
    out.push_str(&text[last..]);
    out
}

/// Every file after the files it refers to.
fn topological(deps: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    fn visit(
        n: &str,
        deps: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, bool>,
        out: &mut Vec<String>,
    ) {
        match state.get(n) {
            Some(true) => return,
            Some(false) => panic!("assets: a reference cycle through {n}"),
            None => {}
        }
        state.insert(n.to_string(), false);
        for d in &deps[n] {
            visit(d, deps, state, out);
        }
        state.insert(n.to_string(), true);
        out.push(n.to_string());
    }
    let mut state = BTreeMap::new();
    let mut out = Vec::new();
    for n in deps.keys() {
        visit(n, deps, &mut state, &mut out);
    }
    out
}

/// `entry` and every module it imports, directly or not.
fn closure(entry: &str, deps: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![entry.to_string()];
    while let Some(n) = todo.pop() {
        if seen.insert(n.clone()) {
            todo.extend(deps[&n].iter().filter(|d| ext(d) == "js").cloned());
        }
    }
    seen.into_iter().collect()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).expect("gzip");
    e.finish().expect("gzip")
}

fn brotli(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let params = brotli::enc::BrotliEncoderParams {
        quality: 11,
        lgwin: 22,
        ..Default::default()
    };
    brotli::BrotliCompress(&mut &bytes[..], &mut out, &params).expect("brotli");
    out
}
