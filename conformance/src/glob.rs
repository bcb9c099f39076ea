//! Shell-style wildcards for case names, field paths, values and pod names: `*` matches any run
//! of characters (`/` included, so one `*` spans path segments), `?` any one character, and
//! `a|b` either alternative.

/// Whether `text` matches `pattern` (or one of its `|`-separated alternatives) as a whole.
pub fn matches(pattern: &str, text: &str) -> bool {
    pattern
        .split('|')
        .any(|alternative| matches_one(alternative, text))
}

fn matches_one(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // Iterative matching with one backtrack point (the last `*`): linear in practice.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn wildcards() {
        assert!(matches("*", ""));
        assert!(matches("*", "a/b/c"));
        assert!(matches(
            "pods/*/env/PYTHONUNBUFFERED",
            "pods/x-master-0/env/PYTHONUNBUFFERED"
        ));
        assert!(!matches(
            "pods/*/env/PYTHON",
            "pods/x-master-0/env/PYTHONUNBUFFERED"
        ));
        assert!(matches("worker-?", "worker-1"));
        assert!(!matches("worker-?", "worker-10"));
        assert!(matches("*-restart-*-137", "pt-restart-onfailure-137"));
        assert!(matches("a*b*c", "aXbYbZc"));
        assert!(!matches("a*b*c", "aXbYbZ"));
        assert!(matches("*-backoff-*|*-deadline", "pt-deadline"));
        assert!(matches("*-backoff-*|*-deadline", "tf-backoff-1"));
        assert!(!matches("*-backoff-*|*-deadline", "tf-deadline-2"));
        assert!(matches(
            "events/Normal ExitedWithCode/*",
            "events/Normal ExitedWithCode/Pod: <ns>.x exited"
        ));
    }
}
