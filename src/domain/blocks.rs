//! Block definitions (`actions` and `form`), their saved state, and the
//! semantic rules that a JSON Schema cannot express.

use serde::{Deserialize, Serialize};

use crate::domain::error::FieldError;

/// Saved state of an interactive block.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BlockState {
    pub disabled: bool,
    pub reason: Option<String>,
    pub chosen_action_id: Option<String>,
    /// Who used the block (`visitor` or `member`), once it was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// What was sent, once a form was used (the visitor's own values, shown
    /// read-only by every widget of the conversation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Button {
    #[serde(rename = "type")]
    pub kind: String,
    pub action_id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<String>,
    /// A dialog the widget shows before it sends the click.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<Confirm>,
}

/// A button's confirmation dialog (§14): stored and shown, the click
/// route does not change.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Confirm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny: Option<String>,
}

impl Button {
    pub fn is_link(&self) -> bool {
        self.url.is_some()
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FieldKind {
    #[default]
    Text,
    Email,
    Number,
    Select,
    Textarea,
    Checkbox,
    Radio,
    Multiselect,
    Date,
    Time,
    Url,
    Tel,
    Rating,
}

impl FieldKind {
    /// Every kind, in the order the contract lists them.
    pub const ALL: [FieldKind; 13] = [
        FieldKind::Text,
        FieldKind::Email,
        FieldKind::Number,
        FieldKind::Select,
        FieldKind::Textarea,
        FieldKind::Checkbox,
        FieldKind::Radio,
        FieldKind::Multiselect,
        FieldKind::Date,
        FieldKind::Time,
        FieldKind::Url,
        FieldKind::Tel,
        FieldKind::Rating,
    ];

    /// Whether the field picks among `options`.
    pub fn has_options(self) -> bool {
        matches!(
            self,
            FieldKind::Select | FieldKind::Radio | FieldKind::Multiselect
        )
    }

    /// Whether `min`/`max` are written as text (`YYYY-MM-DD`, `HH:MM`).
    pub fn text_bounds(self) -> bool {
        matches!(self, FieldKind::Date | FieldKind::Time)
    }
}

/// A `min` or `max` as written: a number (a length, a value, a count) or,
/// for `date` and `time`, a text.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Bound {
    Number(f64),
    Text(String),
}

impl Bound {
    pub fn num(&self) -> Option<f64> {
        match self {
            Bound::Number(n) => Some(*n),
            Bound::Text(_) => None,
        }
    }

    pub fn text(&self) -> Option<&str> {
        match self {
            Bound::Text(t) => Some(t),
            Bound::Number(_) => None,
        }
    }
}

impl From<f64> for Bound {
    fn from(n: f64) -> Self {
        Bound::Number(n)
    }
}

/// A bound as it was written: `50` stays `50`, `0.5` stays `0.5` (JSON
/// does not tell `50` from `50.0`, serde_json writes an `f64` with `.0`).
impl Serialize for Bound {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Bound::Number(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => s.serialize_i64(*x as i64),
            Bound::Number(x) => s.serialize_f64(*x),
            Bound::Text(t) => s.serialize_str(t),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SelectOption {
    pub value: String,
    pub label: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Field {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: FieldKind,
    pub label: String,
    #[serde(default)]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Bound>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Bound>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<SelectOption>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    /// Shown under the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Shown pre-filled; never filled in by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
    /// A regular expression the whole value must match (text, textarea).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
}

impl Field {
    pub fn min_num(&self) -> Option<f64> {
        self.min.as_ref().and_then(Bound::num)
    }

    pub fn max_num(&self) -> Option<f64> {
        self.max.as_ref().and_then(Bound::num)
    }

    /// A rating's top (2–10, default 5).
    pub fn rating_max(&self) -> i64 {
        self.max_num().map_or(5, |m| m as i64)
    }
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Actions {
        #[serde(default)]
        block_id: String,
        #[serde(default = "yes")]
        disable_on_click: bool,
        elements: Vec<Button>,
        #[serde(default)]
        state: BlockState,
    },
    Form {
        #[serde(default)]
        block_id: String,
        #[serde(default)]
        form_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default = "default_submit")]
        submit_label: String,
        #[serde(default = "yes")]
        disable_on_submit: bool,
        fields: Vec<Field>,
        #[serde(default)]
        state: BlockState,
    },
}

fn default_submit() -> String {
    "Submit".into()
}

impl Block {
    pub fn block_id(&self) -> &str {
        match self {
            Block::Actions { block_id, .. } | Block::Form { block_id, .. } => block_id,
        }
    }

    pub fn state(&self) -> &BlockState {
        match self {
            Block::Actions { state, .. } | Block::Form { state, .. } => state,
        }
    }

    pub fn state_mut(&mut self) -> &mut BlockState {
        match self {
            Block::Actions { state, .. } | Block::Form { state, .. } => state,
        }
    }

    /// Whether this block can produce an interaction at all (a group of
    /// only link buttons cannot).
    pub fn is_interactive(&self) -> bool {
        match self {
            Block::Actions { elements, .. } => elements.iter().any(|b| !b.is_link()),
            Block::Form { .. } => true,
        }
    }
}

/// Fills in generated ids and defaults, then checks the relations between
/// parts of a definition that the JSON Schema cannot see. `base` is the
/// pointer of the `blocks` array (`/blocks`).
pub fn normalize_and_check(blocks: &mut [Block], base: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut action_ids: Vec<&str> = Vec::new();
    let mut block_ids: Vec<&str> = Vec::new();
    for block in blocks.iter_mut() {
        match block {
            Block::Actions {
                block_id, elements, ..
            } => {
                if block_id.is_empty() {
                    *block_id = crate::domain::ids::new_id("blk");
                }
                for b in elements.iter_mut() {
                    if b.url.is_none() && b.value.is_none() {
                        b.value = Some(String::new());
                    }
                }
            }
            Block::Form {
                block_id, form_id, ..
            } => {
                if block_id.is_empty() {
                    *block_id = crate::domain::ids::new_id("blk");
                }
                if form_id.is_empty() {
                    *form_id = crate::domain::ids::new_id("form");
                }
            }
        }
    }
    for (i, block) in blocks.iter().enumerate() {
        let at = format!("{base}/{i}");
        if block_ids.contains(&block.block_id()) {
            errors.push(FieldError::new(
                format!("{at}/block_id"),
                "duplicate",
                "block_id must be unique within a message",
            ));
        }
        block_ids.push(block.block_id());
        match block {
            Block::Actions { elements, .. } => {
                for (j, b) in elements.iter().enumerate() {
                    let at = format!("{at}/elements/{j}");
                    if action_ids.contains(&b.action_id.as_str()) {
                        errors.push(FieldError::new(
                            format!("{at}/action_id"),
                            "duplicate",
                            "action_id must be unique within a message",
                        ));
                    }
                    action_ids.push(&b.action_id);
                    if b.value.is_some() && b.url.is_some() {
                        errors.push(FieldError::new(
                            format!("{at}/url"),
                            "value_and_url",
                            "a button has either a value or a url, not both",
                        ));
                    }
                }
            }
            Block::Form {
                form_id, fields, ..
            } => {
                if action_ids.contains(&form_id.as_str()) {
                    errors.push(FieldError::new(
                        format!("{at}/form_id"),
                        "duplicate",
                        "form_id must be unique among the action ids of a message",
                    ));
                }
                action_ids.push(form_id);
                let mut names: Vec<&str> = Vec::new();
                for (j, f) in fields.iter().enumerate() {
                    let at = format!("{at}/fields/{j}");
                    if names.contains(&f.name.as_str()) {
                        errors.push(FieldError::new(
                            format!("{at}/name"),
                            "duplicate",
                            "field name must be unique within a form",
                        ));
                    }
                    names.push(&f.name);
                    crate::domain::fields::check_definition(f, &at, &mut errors);
                }
            }
        }
    }
    errors
}
