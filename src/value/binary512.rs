//! Terraform's numbers are cty's: Go `big.Float`s with a 512-bit mantissa, rounded to nearest
//! even after every operation, printed as the shortest decimal that reads back as the same
//! 512-bit number. Cairn keeps numbers as exact decimals (`BigDecimal`), which agree with that
//! wherever a decimal has at most 153 significant digits (every such decimal is the shortest
//! text of its own 512-bit rounding). Results that need more — a quotient such as `1/3`, or a
//! product of long decimals — are made *canonical*: rounded to 512 bits and replaced by that
//! binary number's shortest decimal, exactly the digits Terraform prints (`1/3` has 155 of
//! them, and `10/3*3` is `10`).

use bigdecimal::num_bigint::{BigInt, BigUint, Sign};
use bigdecimal::BigDecimal;

/// Mantissa bits of cty's numbers.
const PRECISION: u64 = 512;
/// Every decimal with at most this many significant digits is its own shortest text at 512
/// bits: floor((512 - 1) × log10 2).
const EXACT_DIGITS: u64 = 153;

/// The number of significant decimal digits of `d` (0 for zero).
fn significant_digits(d: &BigDecimal) -> u64 {
    let (digits, _) = d.normalized().as_bigint_and_exponent();
    if digits.sign() == Sign::NoSign {
        return 0;
    }
    digits.magnitude().to_string().len() as u64
}

/// `d` as cty would hold it: unchanged when it has at most 153 significant digits, else the
/// shortest decimal of its 512-bit rounding.
pub(crate) fn canonical(d: BigDecimal) -> BigDecimal {
    // Fast: fewer than 2^508 < 10^153 in the digits is at most 153 significant digits.
    if d.as_bigint_and_exponent().0.bits() <= 508 || significant_digits(&d) <= EXACT_DIGITS {
        return d;
    }
    let (digits, scale) = d.as_bigint_and_exponent();
    let (sign, mag) = digits.into_parts();
    let (num, den) = if scale >= 0 {
        (mag, pow10(scale as u64))
    } else {
        (mag * pow10((-scale) as u64), BigUint::from(1u8))
    };
    shortest(sign == Sign::Minus, &num, &den)
}

/// `x / y` as cty computes it: the exact quotient rounded to 512 bits, as its shortest
/// decimal. `y` is not zero.
pub(crate) fn divide(x: &BigDecimal, y: &BigDecimal) -> BigDecimal {
    let (xd, xs) = x.as_bigint_and_exponent();
    let (yd, ys) = y.as_bigint_and_exponent();
    let neg = (xd.sign() == Sign::Minus) != (yd.sign() == Sign::Minus);
    // x / y = (xd / 10^xs) / (yd / 10^ys) = xd·10^ys / (yd·10^xs)
    let mut num = xd.magnitude().clone();
    let mut den = yd.magnitude().clone();
    let shift = ys - xs;
    if shift >= 0 {
        num *= pow10(shift as u64);
    } else {
        den *= pow10((-shift) as u64);
    }
    shortest(neg, &num, &den)
}

fn pow10(n: u64) -> BigUint {
    BigUint::from(10u8).pow(n as u32)
}

/// `a · 2^e` and `b · 10^t` (`e`, `t` of either sign) as two integers in the same ratio.
fn scaled(a: &BigUint, e: i64, b: &BigUint, t: i64) -> (BigUint, BigUint) {
    let (mut l, mut r) = (a.clone(), b.clone());
    if e >= 0 {
        l <<= e as u64;
    } else {
        r <<= (-e) as u64;
    }
    if t >= 0 {
        r *= pow10(t as u64);
    } else {
        l *= pow10((-t) as u64);
    }
    (l, r)
}

/// The ordering of `a · 2^e` and `b · 10^t`.
fn cmp_scaled(a: &BigUint, e: i64, b: &BigUint, t: i64) -> std::cmp::Ordering {
    let (l, r) = scaled(a, e, b, t);
    l.cmp(&r)
}

/// The shortest decimal of the 512-bit rounding (nearest, ties to even) of `num / den`.
fn shortest(neg: bool, num: &BigUint, den: &BigUint) -> BigDecimal {
    use std::cmp::Ordering::*;
    if num.bits() == 0 {
        return BigDecimal::from(0);
    }
    // 1. The mantissa q (2^511 <= q < 2^512) and exponent e with num/den ≈ q · 2^e.
    let mut e = num.bits() as i64 - den.bits() as i64 - PRECISION as i64;
    let (mut q, rem, divisor) = loop {
        let (n, d) = if e >= 0 {
            (num.clone(), den << (e as u64))
        } else {
            (num << ((-e) as u64), den.clone())
        };
        let q = &n / &d;
        let bits = q.bits();
        if bits > PRECISION {
            e += 1;
        } else if bits < PRECISION {
            e -= 1;
        } else {
            let r = &n - &q * &d;
            break (q, r, d);
        }
    };
    let twice = &rem << 1u8;
    let odd = q.bit(0);
    if twice > divisor || (twice == divisor && odd) {
        q += 1u8;
        if q.bits() > PRECISION {
            q >>= 1u8;
            e += 1;
        }
    }
    // 2. The rounding interval, in units of 2^(e-2): value 4q, upper 4q+2, lower 4q-2 (4q-1
    //    when q is a power of two: the number below is closer).
    let f = e - 2;
    let v = &q << 2u8;
    let upper = &v + 2u8;
    let power_of_two = q.count_ones() == 1;
    let lower = &v - if power_of_two { 1u8 } else { 2u8 };
    let inclusive = !q.bit(0);
    // 3. The decimal exponent of the leading digit of v·2^f.
    let mut lead = ((v.bits() as f64 - 1.0 + f as f64) * std::f64::consts::LOG10_2).floor() as i64;
    // Correct the estimate: 10^lead <= v·2^f < 10^(lead+1).
    while cmp_scaled(&v, f, &BigUint::from(1u8), lead) == Less {
        lead -= 1;
    }
    while cmp_scaled(&v, f, &BigUint::from(1u8), lead + 1) != Less {
        lead += 1;
    }
    // 4. The fewest digits k whose truncation or round-up stays inside the interval.
    let within_low = |c: &BigUint, t: i64| match cmp_scaled(&lower, f, c, t) {
        Less => true,
        Equal => inclusive,
        Greater => false,
    };
    let within_high = |c: &BigUint, t: i64| match cmp_scaled(&upper, f, c, t) {
        Greater => true,
        Equal => inclusive,
        Less => false,
    };
    for k in 1..=(PRECISION as i64) {
        let t = lead - k + 1;
        // down = floor(v·2^f / 10^t)
        let (n, d) = scaled(&v, f, &BigUint::from(1u8), t);
        let down = &n / &d;
        let r = &n - &down * &d;
        let up = &down + 1u8;
        let ok_down = within_low(&down, t);
        let ok_up = within_high(&up, t);
        let chosen = match (ok_down, ok_up) {
            (true, true) => {
                // The nearer of the two, ties to even (Go's decimal rounding).
                let twice = &r << 1u8;
                if twice > d || (twice == d && down.bit(0)) {
                    up
                } else {
                    down
                }
            }
            (true, false) => down,
            (false, true) => up,
            (false, false) => continue,
        };
        let sign = if neg { Sign::Minus } else { Sign::Plus };
        return BigDecimal::new(BigInt::from_biguint(sign, chosen), -t).normalized();
    }
    unreachable!("512 digits always distinguish a 512-bit number")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn d(s: &str) -> BigDecimal {
        BigDecimal::from_str(s).unwrap()
    }

    /// What Terraform 1.11's console printed for the same expressions.
    #[test]
    fn quotients_and_products_match_terraform() {
        let third = divide(&d("1"), &d("3"));
        assert_eq!(
            third.to_string(),
            "0.33333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333335"
        );
        assert_eq!(
            divide(&d("2"), &d("3")).to_string(),
            "0.6666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666667"
        );
        assert_eq!(
            divide(&d("1"), &d("7")).to_string(),
            "0.14285714285714285714285714285714285714285714285714285714285714285714285714285714285714285714285714285714285714285714285714285714285714285714285714285714285"
        );
        assert_eq!(
            divide(&d("100000000000000000000000000000"), &d("3")).to_string(),
            "33333333333333333333333333333.333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333334"
        );
        let ten = canonical(divide(&d("10"), &d("3")) * d("3"));
        assert_eq!(ten, d("10"));
        assert_eq!(divide(&d("1"), &d("4")), d("0.25"));
        assert_eq!(divide(&d("-7"), &d("2")), d("-3.5"));
        assert_eq!(canonical(d("0.3")), d("0.3"));
    }
}
