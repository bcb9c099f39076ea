//! A small ordered YAML value and its block-style writer: the install settings keep the order a
//! reader expects (`repository` before `tag`), which a sorted JSON map would lose.

/// A YAML value whose maps keep their insertion order.
#[derive(Debug, Clone, PartialEq)]
pub enum Yaml {
    Str(String),
    /// A number, written as given (`4`, `200`).
    Num(String),
    Bool(bool),
    Map(Vec<(String, Yaml)>),
    List(Vec<Yaml>),
}

/// A map from `(key, value)` pairs, in order.
pub fn map<const N: usize>(entries: [(&str, Yaml); N]) -> Yaml {
    Yaml::Map(entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

pub fn s(text: &str) -> Yaml {
    Yaml::Str(text.to_owned())
}

pub fn n(number: u64) -> Yaml {
    Yaml::Num(number.to_string())
}

impl Yaml {
    /// The value at the dotted `path` (`image.tag`), if there is one.
    pub fn get(&self, path: &str) -> Option<&Yaml> {
        path.split('.').try_fold(self, |value, key| match value {
            Yaml::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        })
    }

    /// Whether this is an empty map or list (Helm's `with` skips those, and so does fixed output).
    pub fn is_empty(&self) -> bool {
        match self {
            Yaml::Map(m) => m.is_empty(),
            Yaml::List(l) => l.is_empty(),
            Yaml::Str(t) => t.is_empty(),
            _ => false,
        }
    }

    /// The value as it is written after `key: ` or `- ` when it fits on that line.
    pub fn inline(&self) -> Option<String> {
        match self {
            Yaml::Str(text) => Some(scalar(text)),
            Yaml::Num(text) => Some(text.clone()),
            Yaml::Bool(b) => Some(b.to_string()),
            Yaml::Map(m) if m.is_empty() => Some("{}".to_owned()),
            Yaml::List(l) if l.is_empty() => Some("[]".to_owned()),
            _ => None,
        }
    }

    /// Block-style lines, each indented by `indent` spaces and ending in a newline.
    pub fn block(&self, indent: usize) -> String {
        let mut out = String::new();
        write_block(self, indent, &mut out);
        out
    }
}

fn write_block(value: &Yaml, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match value {
        Yaml::Map(entries) if !entries.is_empty() => {
            for (key, v) in entries {
                match v.inline() {
                    Some(text) => out.push_str(&format!("{pad}{key}: {text}\n")),
                    None => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        write_block(v, indent + 2, out);
                    }
                }
            }
        }
        Yaml::List(items) if !items.is_empty() => {
            for item in items {
                match item.inline() {
                    Some(text) => out.push_str(&format!("{pad}- {text}\n")),
                    None => {
                        // The item's first line goes after the dash, the rest under it.
                        let nested = item.block(indent + 2);
                        out.push_str(&format!("{pad}- {}", &nested[indent + 2..]));
                    }
                }
            }
        }
        other => {
            let text = other.inline().unwrap_or_default();
            out.push_str(&format!("{pad}{text}\n"));
        }
    }
}

/// A string as a YAML scalar: plain when YAML reads it back as the same string, else
/// JSON-quoted (JSON strings are YAML).
pub fn scalar(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
        && !text.starts_with(['-', '.'])
        && text.parse::<f64>().is_err()
        && !matches!(
            text.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n" | "~"
        );
    if plain {
        text.to_owned()
    } else {
        kfop_runtime::serde_json::Value::from(text).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_nested_maps_and_lists_in_order() {
        let value = map([
            ("b", s("100m")),
            (
                "a",
                Yaml::List(vec![s("ALL"), map([("x", n(1)), ("y", s("on"))])]),
            ),
            ("c", map([])),
            ("d", s("0.0.0.0:8080")),
        ]);
        assert_eq!(
            value.block(2),
            "  b: 100m\n  a:\n    - ALL\n    - x: 1\n      y: \"on\"\n  c: {}\n  d: \"0.0.0.0:8080\"\n"
        );
        assert_eq!(
            value.get("a"),
            Some(&Yaml::List(vec![s("ALL"), map([("x", n(1)), ("y", s("on"))])]))
        );
        assert_eq!(value.get("c.x"), None);
    }
}
