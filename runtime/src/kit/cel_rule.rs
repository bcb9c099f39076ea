//! A manifest's success and failure rules written in CEL (`spec.status.rule: cel`): compiled
//! once, when the manifest is validated or when a job first needs the rule, and evaluated on
//! every status update over the job's replica counts.
//!
//! An expression sees one variable, `replicas`: a map from each role the job has to its counts,
//! `{total, active, succeeded, failed}`, e.g. `replicas.Worker.succeeded * 2 >= replicas.Worker.total`.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, LazyLock, OnceLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::{Context, Env, ExecutionError, Program, Value};

/// The variable holding the roles' counts.
pub const REPLICAS: &str = "replicas";

/// The counts of one role, the fields of `replicas.<Role>`.
pub const COUNT_FIELDS: [&str; 4] = ["total", "active", "succeeded", "failed"];

/// The standard environment, built once: building it declares every standard function, too
/// much to repeat for each evaluation.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(Env::stdlib()));

/// Why an expression does not compile. Positions are 1-based, within the expression's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// The CEL parser refused the text (its own message; the parser's error holds no source
    /// worth keeping beyond it).
    #[error("{line}:{column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// `replicas.<Role>` names a role the framework does not declare.
    #[error("{line}:{column}: unknown role `{role}`; declared roles are {}", declared.join(", "))]
    UnknownRole {
        line: usize,
        column: usize,
        role: String,
        declared: Vec<String>,
    },
    /// `replicas.<Role>.<field>` is not one of the counts.
    #[error("{line}:{column}: `{field}` is not a count of {role}; use {}", COUNT_FIELDS.join(", "))]
    UnknownCount {
        line: usize,
        column: usize,
        role: String,
        field: String,
    },
    /// A variable other than `replicas` (or one a macro such as `all` binds).
    #[error("{line}:{column}: unknown variable `{name}`; expressions read `{REPLICAS}`")]
    UnknownVariable {
        line: usize,
        column: usize,
        name: String,
    },
}

/// Why an expression could not decide, for one status update.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// The rule did not compile (a framework compiled from a manifest the generator accepted
    /// should never get here).
    #[error("the rule does not compile: {0}")]
    Compile(#[from] CelError),
    /// E.g. `replicas.Chief` for a job without a Chief.
    #[error("evaluating the rule: {0}")]
    Execution(#[source] ExecutionError),
    #[error("the rule gives {0}, not a bool")]
    NotBool(String),
}

/// One role's counts as an expression sees them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub total: i32,
    pub active: i32,
    pub succeeded: i32,
    pub failed: i32,
}

impl Counts {
    fn value(self) -> Value {
        let fields = [self.total, self.active, self.succeeded, self.failed];
        let map: HashMap<String, i64> = COUNT_FIELDS
            .iter()
            .zip(fields)
            .map(|(name, n)| ((*name).to_owned(), i64::from(n)))
            .collect();
        map.into()
    }
}

/// The roles whose counts an expression reads, found in its text: those it names as
/// `replicas.<Role>` (a presence test, `has(replicas.<Role>)`, reads no counts), or every role
/// when it reads `replicas` as a whole (`replicas.all(r, ...)`, `replicas[r]`, `size(replicas)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RolesRead {
    Named(BTreeSet<String>),
    All,
}

impl RolesRead {
    /// Whether the expression reads `role`'s counts.
    pub fn contains(&self, role: &str) -> bool {
        match self {
            Self::Named(roles) => roles.contains(role),
            Self::All => true,
        }
    }

    fn collect(&mut self, node: &IdedExpr) {
        match &node.expr {
            Expr::Select(select) if matches!(&select.operand.expr, Expr::Ident(root) if root == REPLICAS) => {
                if let (Self::Named(roles), false) = (&mut *self, select.test) {
                    roles.insert(select.field.clone());
                }
            }
            Expr::Ident(name) if name == REPLICAS => *self = Self::All,
            expr => children(expr).into_iter().for_each(|child| self.collect(child)),
        }
    }
}

/// An expression with its text (for messages and for equality), compiled once: at once by
/// [`CelRule::compile`], at its first use by [`CelRule::deferred`]. Clones share the compiled
/// program.
#[derive(Clone)]
pub struct CelRule {
    source: Arc<str>,
    compiled: Arc<OnceLock<Result<Compiled, CelError>>>,
}

/// What compiling an expression gives.
struct Compiled {
    program: Program,
    reads: RolesRead,
}

/// What a rule that does not compile reads: every role, as an unknown expression might.
static READS_ALL: RolesRead = RolesRead::All;

impl fmt::Debug for CelRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CelRule").field(&self.source).finish()
    }
}

/// Two rules are the same when their text is: the program is a function of it.
impl PartialEq for CelRule {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for CelRule {}

impl CelRule {
    /// Compiles `source` and checks that every `replicas.<Role>.<count>` it spells names one of
    /// `roles` and a count: a misspelt role would otherwise only show as a rule that never holds.
    pub fn compile(source: &str, roles: &[&str]) -> Result<Self, CelError> {
        let rule = Self::deferred(source);
        let compiled = rule.compiled().map_err(CelError::clone)?;
        Checker {
            program: &compiled.program,
            roles,
        }
        .check(compiled.program.expression(), &mut Vec::new())?;
        Ok(rule)
    }

    /// `source`, compiled when it is first evaluated, without checking the names it reads: for
    /// a rule validated already (a generated framework's, whose manifest `kfop gen` checked, or
    /// a run-time framework's, checked when it was registered). A kind none of whose jobs needs
    /// its rule then never loads the CEL parser and environment (about 1.2 MB of an idle
    /// operator's RSS).
    pub fn deferred(source: &str) -> Self {
        Self {
            source: source.into(),
            compiled: Arc::new(OnceLock::new()),
        }
    }

    /// The program, compiled now if it was not yet; or why it does not compile.
    fn compiled(&self) -> Result<&Compiled, &CelError> {
        self.compiled
            .get_or_init(|| {
                let program = ENV.compile(&self.source).map_err(|e| syntax_error(&e))?;
                let mut reads = RolesRead::Named(BTreeSet::new());
                reads.collect(program.expression());
                Ok(Compiled { program, reads })
            })
            .as_ref()
    }

    /// Why the expression does not compile, if it does not (compiling it now if it was not yet).
    pub fn error(&self) -> Option<&CelError> {
        self.compiled().err()
    }

    /// The expression's text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The roles whose counts the expression reads (every role when it does not compile).
    pub fn roles_read(&self) -> &RolesRead {
        self.compiled().map_or(&READS_ALL, |c| &c.reads)
    }

    /// Whether the rule holds for these counts, by role.
    pub fn evaluate(&self, replicas: &BTreeMap<String, Counts>) -> Result<bool, EvalError> {
        let compiled = self.compiled().map_err(|e| EvalError::Compile(e.clone()))?;
        let map: HashMap<String, Value> = replicas
            .iter()
            .map(|(role, counts)| (role.clone(), counts.value()))
            .collect();
        let mut context = Context::with_env(Arc::clone(&ENV));
        context.add_variable_from_value(REPLICAS, map);
        match compiled.program.execute(&context) {
            Ok(Value::Bool(holds)) => Ok(holds),
            Ok(other) => Err(EvalError::NotBool(format!("{other:?}"))),
            Err(e) => Err(EvalError::Execution(e)),
        }
    }
}

/// The first of the parser's errors, at its position (the parser's is 1-based already).
fn syntax_error(errors: &cel::ParseErrors) -> CelError {
    let first = errors.errors.first();
    let (line, column) = first.map_or((1, 1), |e| {
        (
            usize::try_from(e.pos.0).unwrap_or(1).max(1),
            usize::try_from(e.pos.1).unwrap_or(1).max(1),
        )
    });
    CelError::Syntax {
        line,
        column,
        message: first.map_or_else(|| errors.to_string(), |e| e.msg.clone()),
    }
}

/// The expressions directly below `expr`, in the order they are written.
fn children(expr: &Expr) -> Vec<&IdedExpr> {
    fn entry(entry: &EntryExpr) -> Vec<&IdedExpr> {
        match entry {
            EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
            EntryExpr::StructField(f) => vec![&f.value],
        }
    }
    match expr {
        Expr::Select(select) => vec![&select.operand],
        Expr::Call(call) => call.target.as_deref().into_iter().chain(&call.args).collect(),
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => map.entries.iter().flat_map(|e| entry(&e.expr)).collect(),
        Expr::Struct(s) => s.entries.iter().flat_map(|e| entry(&e.expr)).collect(),
        Expr::Comprehension(c) => vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

/// Walks an expression for the names it reads.
struct Checker<'a> {
    program: &'a Program,
    roles: &'a [&'a str],
}

impl Checker<'_> {
    /// 1-based line and column of a node in the expression's text.
    fn position(&self, node: &IdedExpr) -> (usize, usize) {
        let info = self.program.source_info();
        let start = info.offset_for(node.id).map_or(0, |(start, _)| start as usize);
        let before = info.source.get(..start).unwrap_or_default();
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().unwrap_or_default().chars().count() + 1;
        (line, column)
    }

    /// `bound` holds the variables the enclosing macros bind (`r` in `replicas.all(r, ...)`).
    fn check(&self, node: &IdedExpr, bound: &mut Vec<String>) -> Result<(), CelError> {
        match &node.expr {
            Expr::Ident(name) if name != REPLICAS && !bound.contains(name) => {
                let (line, column) = self.position(node);
                Err(CelError::UnknownVariable {
                    line,
                    column,
                    name: name.clone(),
                })
            }
            Expr::Select(select) => {
                self.check_counts(node)?;
                self.check(&select.operand, bound)
            }
            Expr::Comprehension(c) => {
                self.check(&c.iter_range, bound)?;
                let depth = bound.len();
                bound.extend([c.iter_var.clone(), c.accu_var.clone()]);
                bound.extend(c.iter_var2.iter().cloned());
                let inner = [&c.accu_init, &c.loop_cond, &c.loop_step, &c.result]
                    .into_iter()
                    .try_for_each(|e| self.check(e, bound));
                bound.truncate(depth);
                inner
            }
            expr => children(expr).into_iter().try_for_each(|e| self.check(e, bound)),
        }
    }

    /// `replicas.<Role>` and `replicas.<Role>.<count>`: the role declared, the count one of
    /// [`COUNT_FIELDS`]. (`has(...)` tests are left alone: they ask whether a role is present.)
    fn check_counts(&self, node: &IdedExpr) -> Result<(), CelError> {
        let Expr::Select(select) = &node.expr else {
            return Ok(());
        };
        if select.test {
            return Ok(());
        }
        match &select.operand.expr {
            Expr::Ident(root) if root == REPLICAS && !self.roles.contains(&select.field.as_str()) => {
                let (line, column) = self.position(node);
                Err(CelError::UnknownRole {
                    line,
                    column,
                    role: select.field.clone(),
                    declared: self.roles.iter().map(|r| (*r).to_owned()).collect(),
                })
            }
            Expr::Select(inner)
                if !inner.test
                    && matches!(&inner.operand.expr, Expr::Ident(root) if root == REPLICAS)
                    && !COUNT_FIELDS.contains(&select.field.as_str()) =>
            {
                let (line, column) = self.position(node);
                Err(CelError::UnknownCount {
                    line,
                    column,
                    role: inner.field.clone(),
                    field: select.field.clone(),
                })
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const ROLES: &[&str] = &["Master", "Worker"];

    fn counts(total: i32, active: i32, succeeded: i32, failed: i32) -> Counts {
        Counts {
            total,
            active,
            succeeded,
            failed,
        }
    }

    fn replicas(worker: Counts) -> BTreeMap<String, Counts> {
        BTreeMap::from([("Worker".to_owned(), worker)])
    }

    #[test]
    fn a_rule_holds_over_the_counts() {
        let rule = CelRule::compile("replicas.Worker.succeeded * 2 >= replicas.Worker.total", ROLES).unwrap();
        assert_eq!(rule.evaluate(&replicas(counts(4, 2, 2, 0))), Ok(true));
        assert_eq!(rule.evaluate(&replicas(counts(4, 3, 1, 0))), Ok(false));
        assert_eq!(
            rule.source(),
            "replicas.Worker.succeeded * 2 >= replicas.Worker.total"
        );
    }

    #[test]
    fn a_deferred_rule_compiles_at_first_use_and_keeps_its_error() {
        let good = CelRule::deferred("replicas.Worker.succeeded >= replicas.Worker.total");
        assert!(good.compiled.get().is_none(), "compiled before its first use");
        assert_eq!(good.clone().evaluate(&replicas(counts(2, 0, 2, 0))), Ok(true));
        assert!(
            good.compiled.get().is_some(),
            "a clone compiles for the original too"
        );
        assert!(good.roles_read().contains("Worker") && !good.roles_read().contains("Master"));

        let bad = CelRule::deferred("replicas.Worker.succeeded >= )");
        let error = bad.error().cloned().unwrap();
        assert!(matches!(error, CelError::Syntax { line: 1, .. }), "{error}");
        assert_eq!(
            bad.evaluate(&replicas(counts(1, 0, 1, 0))),
            Err(EvalError::Compile(error))
        );
        assert!(
            bad.roles_read().contains("Master"),
            "an unknown rule reads every role"
        );
    }

    #[test]
    fn macros_bind_their_variables() {
        let rule = CelRule::compile("replicas.all(r, replicas[r].failed == 0)", ROLES).unwrap();
        assert_eq!(rule.evaluate(&replicas(counts(2, 2, 0, 0))), Ok(true));
        assert_eq!(rule.evaluate(&replicas(counts(2, 1, 0, 1))), Ok(false));
    }

    #[test]
    fn a_role_the_job_lacks_is_an_error_not_a_panic() {
        let rule = CelRule::compile("replicas.Master.succeeded == 1", ROLES).unwrap();
        let error = rule.evaluate(&replicas(counts(1, 1, 0, 0))).unwrap_err();
        assert!(matches!(error, EvalError::Execution(_)), "{error}");
        let presence =
            CelRule::compile("has(replicas.Master) && replicas.Master.succeeded == 1", ROLES).unwrap();
        assert_eq!(presence.evaluate(&replicas(counts(1, 1, 0, 0))), Ok(false));
    }

    #[test]
    fn a_rule_must_give_a_bool() {
        let rule = CelRule::compile("replicas.Worker.total", ROLES).unwrap();
        assert!(matches!(
            rule.evaluate(&replicas(counts(1, 0, 0, 0))),
            Err(EvalError::NotBool(_))
        ));
    }

    #[test]
    fn syntax_errors_keep_the_parsers_position() {
        let error = CelRule::compile("replicas.Worker.succeeded >= )", ROLES).unwrap_err();
        let CelError::Syntax { line, column, .. } = &error else {
            panic!("{error:?}")
        };
        assert_eq!((*line, *column), (1, 30), "{error}");
    }

    #[test]
    fn unknown_names_are_refused_where_they_are_written() {
        let error = |source| CelRule::compile(source, ROLES).unwrap_err().to_string();
        assert_eq!(
            error("replicas.Worker.succeeded > 0 && replicas.Chief.succeeded > 0"),
            "1:42: unknown role `Chief`; declared roles are Master, Worker"
        );
        assert_eq!(
            error("replicas.Worker.done > 0"),
            "1:16: `done` is not a count of Worker; use total, active, succeeded, failed"
        );
        assert_eq!(
            error("replica.Worker.succeeded > 0"),
            "1:1: unknown variable `replica`; expressions read `replicas`"
        );
    }
}
