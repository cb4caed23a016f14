//! §8: `/openapi.json` is a document a client generator can use. (The
//! independent checks — openapi-spec-validator, schemathesis and a
//! generated TypeScript client — run in `scripts/openapi-checks`.)

use std::collections::HashSet;

use serde_json::Value;

use super::json_of;
use crate::helpers::spawn_app;

fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            out.push((method.clone(), path.clone(), op));
        }
    }
    out
}

store_test! {
async fn every_operation_is_typed_secured_by_a_declared_scheme_and_lists_its_errors() {
    let app = spawn_app().await;
    let doc = json_of(app.get("/openapi.json", "").await, 200).await;
    let schemes = doc["components"]["securitySchemes"].as_object().expect("schemes");
    for name in ["admin_token", "api_key", "visitor_token"] {
        assert_eq!(schemes[name]["type"], "http", "{name}");
        assert_eq!(schemes[name]["scheme"], "bearer", "{name}");
    }
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    let mut ids = HashSet::new();
    for (method, path, op) in operations(&doc) {
        let at = format!("{method} {path}");
        let id = op["operationId"].as_str().expect("operationId");
        assert!(ids.insert(id.to_string()), "operationId {id} twice ({at})");
        for req in op["security"].as_array().into_iter().flatten() {
            for name in req.as_object().unwrap().keys() {
                assert!(schemes.contains_key(name), "{at}: undeclared scheme {name}");
            }
        }
        if let Some(body) = op.get("requestBody") {
            let schema = &body["content"]["application/json"]["schema"];
            assert!(schema.is_object() && schema != &serde_json::json!({"type": "object"}), "{at}: untyped body {schema}");
            for s in ["400", "413", "415", "422"] {
                assert!(op["responses"].get(s).is_some(), "{at}: {s} missing");
            }
        }
        if op.get("security").is_some() {
            assert!(op["responses"].get("401").is_some(), "{at}: 401 missing");
        }
        if path.contains('{') {
            assert!(op["responses"].get("404").is_some(), "{at}: 404 missing");
        }
        for (status, r) in op["responses"].as_object().expect("responses") {
            let content = r["content"].as_object();
            if status.starts_with('4') {
                let problem = &r["content"]["application/problem+json"]["schema"]["$ref"];
                assert_eq!(problem, "#/components/schemas/Problem", "{at} {status}");
            } else if status != "204" {
                let content = content.unwrap_or_else(|| panic!("{at} {status}: no body schema"));
                assert!(content.values().all(|c| c["schema"].is_object()), "{at} {status}");
            }
        }
        // Every $ref resolves.
        refs(op, &mut |r| {
            let name = r.strip_prefix("#/components/schemas/").unwrap_or(r);
            assert!(schemas.contains_key(name), "{at}: dangling {r}");
        });
    }
    for (method, path) in [("get", "/widget/v1/conversations/{cid}/stream"), ("get", "/api/v1/stream")] {
        let c = &doc["paths"][path][method]["responses"]["200"]["content"];
        assert!(c.get("text/event-stream").is_some(), "{path}: {c}");
    }
    // Rate-limited operations list 429 (§10).
    for (method, path) in [("post", "/widget/v1/messages/{mid}/clicks"), ("get", "/api/v1/events")] {
        assert!(doc["paths"][path][method]["responses"].get("429").is_some(), "{path}");
    }
}
}

fn refs(v: &Value, f: &mut impl FnMut(&str)) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref") {
                f(r);
            }
            o.values().for_each(|x| refs(x, f));
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, f)),
        _ => {}
    }
}

store_test! {
async fn the_schemas_of_schemas_are_referenced_not_restated() {
    let app = spawn_app().await;
    let doc = json_of(app.get("/openapi.json", "").await, 200).await;
    let s = &doc["components"]["schemas"];
    let post = &doc["paths"]["/api/v1/conversations/{cid}/messages"]["post"];
    assert_eq!(
        post["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/NewMessage"
    );
    let reply = &doc["paths"]["/api/v1/responses/{token}"]["post"];
    assert_eq!(
        reply["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/Reply"
    );
    // The component is the file's, its references renamed.
    let file: Value = serde_json::from_str(include_str!("../../../schemas/blocks.schema.json")).unwrap();
    let mut button = file["$defs"]["button"].clone();
    button["properties"]["action_id"]["$ref"] = "#/components/schemas/Blocks_id".into();
    button["properties"]["confirm"]["$ref"] = "#/components/schemas/Blocks_confirm".into();
    assert_eq!(s["Blocks_button"], button);
    // A stored message's blocks are the file's definitions with their state.
    assert_eq!(
        s["MessageBlock_actions"]["properties"]["elements"]["items"]["$ref"],
        "#/components/schemas/Blocks_button"
    );
    // The events, as webhooks.
    for (name, schema) in [
        ("interaction.button_clicked", "ButtonClickedEvent"),
        ("interaction.form_submitted", "FormSubmittedEvent"),
        ("message.received", "MessageReceivedEvent"),
    ] {
        assert_eq!(
            doc["webhooks"][name]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            format!("#/components/schemas/{schema}")
        );
    }
}
}
