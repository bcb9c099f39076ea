//! Exact sums of Kubernetes resource quantities.
//!
//! `k8s_openapi`'s `Quantity` is only the string; the crates that do arithmetic on it are small
//! and thinly maintained or pull in a decimal library, and the grammar is short. Values are held
//! as an integer count of nano-units (Kubernetes' own finest precision), which is exact for every
//! suffix from `n` to `Ei` and keeps sums free of rounding.
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A quantity that is not a valid Kubernetes quantity, or one too large to add.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("invalid quantity {0:?}")]
    Invalid(String),
    #[error("quantity {0:?} is out of range")]
    OutOfRange(String),
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// A parsed quantity: its exact value and whether it was written with a binary suffix
/// (`Ki`, `Mi`, ...), which decides how a sum is written back, as in Kubernetes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Amount {
    nanos: i128,
    binary: bool,
}

impl Amount {
    pub const ZERO: Self = Self {
        nanos: 0,
        binary: false,
    };

    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        parse(text).ok_or_else(|| QuantityError::Invalid(text.to_owned()))?
    }

    pub fn of(quantity: &Quantity) -> Result<Self, QuantityError> {
        Self::parse(&quantity.0)
    }

    /// The sum, written in this amount's format unless this one is zero (Kubernetes' `Add`).
    pub fn checked_add(self, other: Self) -> Option<Self> {
        Some(Self {
            nanos: self.nanos.checked_add(other.nanos)?,
            binary: if self.nanos == 0 {
                other.binary
            } else {
                self.binary
            },
        })
    }

    /// Equal values, however written (`1Gi` and `1024Mi`).
    pub fn same_value(self, other: Self) -> bool {
        self.nanos == other.nanos
    }

    /// The canonical string: the largest suffix that keeps the number whole (`1536Mi`, `1500m`,
    /// `2`), binary suffixes only for binary amounts that are whole and at least 1Ki.
    pub fn to_quantity(self) -> Quantity {
        Quantity(self.to_string())
    }
}

impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        if self.binary && self.nanos % NANOS_PER_UNIT == 0 && self.nanos.abs() >= 1024 * NANOS_PER_UNIT {
            let mut units = self.nanos / NANOS_PER_UNIT;
            let mut suffix = "";
            for next in ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"] {
                if units % 1024 != 0 {
                    break;
                }
                units /= 1024;
                suffix = next;
            }
            return write!(f, "{units}{suffix}");
        }
        let mut mantissa = self.nanos;
        let mut suffix = "n";
        for next in ["u", "m", "", "k", "M", "G", "T", "P", "E"] {
            if mantissa % 1000 != 0 {
                break;
            }
            mantissa /= 1000;
            suffix = next;
        }
        write!(f, "{mantissa}{suffix}")
    }
}

/// `None` for a syntax error; `Some(Err)` for a valid quantity that does not fit.
fn parse(text: &str) -> Option<Result<Amount, QuantityError>> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return None;
    }
    let (multiplier, divisor_pow10): (i128, u32) = match suffix {
        "" => (1, 0),
        "Ki" => (1 << 10, 0),
        "Mi" => (1 << 20, 0),
        "Gi" => (1 << 30, 0),
        "Ti" => (1 << 40, 0),
        "Pi" => (1 << 50, 0),
        "Ei" => (1 << 60, 0),
        "n" => (1, 9),
        "u" => (1, 6),
        "m" => (1, 3),
        "k" => (10_i128.pow(3), 0),
        "M" => (10_i128.pow(6), 0),
        "G" => (10_i128.pow(9), 0),
        "T" => (10_i128.pow(12), 0),
        "P" => (10_i128.pow(15), 0),
        "E" => (10_i128.pow(18), 0),
        exponent => return parse_exponent(negative, whole, fraction, exponent, text),
    };
    let out_of_range = || QuantityError::OutOfRange(text.to_owned());
    // value = digits / 10^(fraction len) * multiplier / 10^divisor_pow10, in nanos.
    let digits = digits_value(whole, fraction)?;
    let Some(numerator) = digits
        .and_then(|d| d.checked_mul(multiplier))
        .and_then(|d| d.checked_mul(NANOS_PER_UNIT))
    else {
        return Some(Err(out_of_range()));
    };
    let scale = u32::try_from(fraction.len()).ok()?.checked_add(divisor_pow10)?;
    let binary = suffix.ends_with('i');
    Some(
        scaled(numerator, scale, negative)
            .ok_or_else(out_of_range)
            .map(|nanos| Amount { nanos, binary }),
    )
}

/// `1e3`, `2.5E-2`: a decimal exponent instead of a suffix.
fn parse_exponent(
    negative: bool,
    whole: &str,
    fraction: &str,
    exponent: &str,
    text: &str,
) -> Option<Result<Amount, QuantityError>> {
    let digits = exponent.strip_prefix(['e', 'E'])?;
    let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let out_of_range = || QuantityError::OutOfRange(text.to_owned());
    let Ok(power) = digits.parse::<i32>() else {
        return Some(Err(out_of_range()));
    };
    let Some(mantissa) = digits_value(whole, fraction)?.and_then(|d| d.checked_mul(NANOS_PER_UNIT)) else {
        return Some(Err(out_of_range()));
    };
    let scale = i64::try_from(fraction.len()).ok()? - i64::from(power);
    let nanos = if scale >= 0 {
        u32::try_from(scale)
            .ok()
            .and_then(|s| scaled(mantissa, s, negative))
    } else {
        u32::try_from(-scale)
            .ok()
            .and_then(|s| 10_i128.checked_pow(s))
            .and_then(|m| mantissa.checked_mul(m))
            .map(|n| if negative { -n } else { n })
    };
    Some(
        nanos
            .ok_or_else(out_of_range)
            .map(|nanos| Amount { nanos, binary: false }),
    )
}

/// The digits of `whole.fraction` as one integer; `None` for non-digits, `Some(None)` on overflow.
fn digits_value(whole: &str, fraction: &str) -> Option<Option<i128>> {
    let mut value: i128 = 0;
    for byte in whole.bytes().chain(fraction.bytes()) {
        if !byte.is_ascii_digit() {
            return None;
        }
        let Some(next) = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(i128::from(byte - b'0')))
        else {
            return Some(None);
        };
        value = next;
    }
    Some(Some(value))
}

/// `numerator / 10^scale`, rounded away from zero as Kubernetes rounds sub-nano precision up.
fn scaled(numerator: i128, scale: u32, negative: bool) -> Option<i128> {
    let nanos = match 10_i128.checked_pow(scale) {
        Some(divisor) => numerator / divisor + i128::from(numerator % divisor != 0),
        // More than 38 decimal places: any non-zero value is below one nano-unit.
        None => i128::from(numerator != 0),
    };
    Some(if negative { -nanos } else { nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> String {
        Amount::parse(text).unwrap().to_string()
    }

    fn sum(a: &str, b: &str) -> String {
        Amount::parse(a)
            .unwrap()
            .checked_add(Amount::parse(b).unwrap())
            .unwrap()
            .to_string()
    }

    #[test]
    fn parses_every_common_suffix() {
        let nanos = |t: &str| Amount::parse(t).unwrap().nanos;
        assert_eq!(nanos("1"), NANOS_PER_UNIT);
        assert_eq!(nanos("500m"), NANOS_PER_UNIT / 2);
        assert_eq!(nanos("0.5"), NANOS_PER_UNIT / 2);
        assert_eq!(nanos(".5"), NANOS_PER_UNIT / 2);
        assert_eq!(nanos("2k"), 2000 * NANOS_PER_UNIT);
        assert_eq!(nanos("1M"), 1_000_000 * NANOS_PER_UNIT);
        assert_eq!(nanos("1G"), 1_000_000_000 * NANOS_PER_UNIT);
        assert_eq!(nanos("1T"), 1_000_000_000_000 * NANOS_PER_UNIT);
        assert_eq!(nanos("1Ki"), 1024 * NANOS_PER_UNIT);
        assert_eq!(nanos("1.5Gi"), 1_610_612_736 * NANOS_PER_UNIT);
        assert_eq!(nanos("1Ti"), (1_i128 << 40) * NANOS_PER_UNIT);
        assert_eq!(nanos("1e3"), 1000 * NANOS_PER_UNIT);
        assert_eq!(nanos("25E-2"), NANOS_PER_UNIT / 4);
        assert_eq!(nanos("-1"), -NANOS_PER_UNIT);
        assert_eq!(nanos("100n"), 100);
        assert_eq!(nanos("1u"), 1000);
    }

    #[test]
    fn rejects_what_kubernetes_rejects() {
        for bad in [
            "", "abc", "1.2.3", "1Kb", "1 Gi", "Gi", ".", "1e", "1e+", "--1", "1ki",
        ] {
            assert!(
                matches!(Amount::parse(bad), Err(QuantityError::Invalid(_))),
                "{bad:?} parsed"
            );
        }
        assert!(matches!(
            Amount::parse("1e400"),
            Err(QuantityError::OutOfRange(_))
        ));
    }

    #[test]
    fn writes_the_largest_whole_suffix() {
        assert_eq!(canonical("0.5"), "500m");
        assert_eq!(canonical("2000m"), "2");
        assert_eq!(canonical("1000000"), "1M");
        assert_eq!(canonical("1536Mi"), "1536Mi");
        assert_eq!(canonical("1024Mi"), "1Gi");
        assert_eq!(canonical("0.5Ki"), "512");
        assert_eq!(canonical("0"), "0");
        assert_eq!(canonical("0Gi"), "0");
    }

    #[test]
    fn sums_are_exact_and_keep_the_first_format() {
        assert_eq!(sum("500m", "1500m"), "2");
        assert_eq!(sum("1", "500m"), "1500m");
        assert_eq!(sum("1Gi", "512Mi"), "1536Mi");
        assert_eq!(sum("2Gi", "2Gi"), "4Gi");
        assert_eq!(sum("1Gi", "1G"), "2073741824");
        assert_eq!(sum("1G", "1Gi"), "2073741824");
        assert_eq!(sum("0", "1Gi"), "1Gi");
        assert_eq!(sum("100n", "0.9999999"), "1");
    }
}
