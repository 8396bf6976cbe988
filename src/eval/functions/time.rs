//! Date and time functions: formatdate, timeadd, timecmp.
//!
//! Timestamps are RFC 3339 strings (`2018-01-02T23:12:01Z`, `...-08:00`, optional fractional
//! seconds), parsed and written as Go's `time` package does for Terraform, with the same error
//! wording. Durations use Go's syntax (`1h30m`, `-1.5h`, units ns, us, µs, ms, s, m, h). Any
//! unknown argument gives an unknown result.

use super::{arg_err, call_err, p, str_of, Def, FunctionContext, Res, Ret, P};
use crate::eval::convert::quote;
use crate::value::Value;

pub(super) const DEFS: &[Def] = &[
    Def {
        name: "formatdate",
        params: &[p("format", P::Str), p("time", P::Str)],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: formatdate,
    },
    Def {
        name: "timeadd",
        params: &[p("timestamp", P::Str), p("duration", P::Str)],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: timeadd,
    },
    Def {
        name: "timecmp",
        params: &[p("timestamp_a", P::Str), p("timestamp_b", P::Str)],
        variadic: None,
        ret: Ret::Fixed(P::Num),
        imp: timecmp,
    },
];

/// An instant with the UTC offset it was written in.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Time {
    /// Seconds since the Unix epoch (UTC).
    secs: i64,
    nanos: u32,
    /// Offset of the written local time from UTC, in seconds.
    offset: i32,
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Parses an RFC 3339 timestamp; errors are worded as Terraform words them.
fn parse_time(s: &str) -> Result<Time, String> {
    let b = s.as_bytes();
    let mut i = 0;
    let fail = |what: &str, i: usize| {
        if i >= s.len() {
            format!("not a valid RFC3339 timestamp: end of string before {what}")
        } else {
            format!(
                "not a valid RFC3339 timestamp: cannot use {} as {what}",
                quote(&s[i..])
            )
        }
    };
    let digits = |i: usize, n: usize| -> Option<i64> {
        let part = b.get(i..i + n)?;
        if part.iter().all(u8::is_ascii_digit) {
            std::str::from_utf8(part).ok()?.parse().ok()
        } else {
            None
        }
    };
    let lit = |i: usize, c: u8| -> Result<(), String> {
        match b.get(i) {
            Some(&x) if x == c => Ok(()),
            Some(_) => Err(format!(
                "not a valid RFC3339 timestamp: found {} where {} is expected",
                quote(&s[i..]),
                quote(&(c as char).to_string())
            )),
            None => Err(format!(
                "not a valid RFC3339 timestamp: end of string where {} is expected",
                quote(&(c as char).to_string())
            )),
        }
    };
    let year = digits(i, 4).ok_or_else(|| fail("year", i))?;
    i += 4;
    lit(i, b'-')?;
    i += 1;
    let month = digits(i, 2).ok_or_else(|| fail("month", i))?;
    i += 2;
    lit(i, b'-')?;
    i += 1;
    let day = digits(i, 2).ok_or_else(|| fail("day of month", i))?;
    i += 2;
    if b.get(i) != Some(&b'T') {
        return Err(
            "not a valid RFC3339 timestamp: missing required time introducer 'T'".to_string(),
        );
    }
    i += 1;
    let hour = digits(i, 2).ok_or_else(|| fail("hour", i))?;
    i += 2;
    lit(i, b':')?;
    i += 1;
    let minute = digits(i, 2).ok_or_else(|| fail("minute", i))?;
    i += 2;
    lit(i, b':')?;
    i += 1;
    let second = digits(i, 2).ok_or_else(|| fail("second", i))?;
    i += 2;
    let mut nanos: u32 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(fail("second", start - 1));
        }
        let frac = &s[start..i.min(start + 9)];
        nanos = format!("{frac:0<9}").parse().unwrap_or(0);
    }
    let offset: i32 = match b.get(i) {
        Some(b'Z') => {
            i += 1;
            0
        }
        Some(b'+') | Some(b'-') => {
            let sign = if b[i] == b'-' { -1 } else { 1 };
            let (Some(h), Some(b':'), Some(m)) = (digits(i + 1, 2), b.get(i + 3), digits(i + 4, 2))
            else {
                return Err(fail("UTC offset", i));
            };
            i += 6;
            sign * (h as i32 * 3600 + m as i32 * 60)
        }
        _ => return Err(fail("UTC offset", i)),
    };
    if i < b.len() {
        return Err(format!(
            "not a valid RFC3339 timestamp: extra text: {}",
            quote(&s[i..])
        ));
    }
    if !(1..=12).contains(&month) {
        return Err("not a valid RFC3339 timestamp: month out of range".into());
    }
    if day < 1 || day > days_in_month(year, month) {
        return Err("not a valid RFC3339 timestamp: day out of range".into());
    }
    if hour > 23 || minute > 59 || second > 59 {
        let what = if hour > 23 {
            "hour"
        } else if minute > 59 {
            "minute"
        } else {
            "second"
        };
        return Err(format!(
            "not a valid RFC3339 timestamp: {what} out of range"
        ));
    }
    let local = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Ok(Time {
        secs: local - offset as i64,
        nanos,
        offset,
    })
}

/// The local date and time parts: (year, month, day, hour, minute, second, weekday 0=Sunday).
fn parts(t: &Time) -> (i64, i64, i64, i64, i64, i64, i64) {
    let local = t.secs + t.offset as i64;
    let days = local.div_euclid(86_400);
    let rem = local.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let weekday = (days + 4).rem_euclid(7);
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60, weekday)
}

fn offset_text(offset: i32, colon: bool) -> String {
    let sign = if offset < 0 { '-' } else { '+' };
    let a = offset.abs();
    if colon {
        format!("{sign}{:02}:{:02}", a / 3600, a % 3600 / 60)
    } else {
        format!("{sign}{:02}{:02}", a / 3600, a % 3600 / 60)
    }
}

/// RFC 3339 at whole seconds, as Go's `time.RFC3339` layout writes it.
fn rfc3339(t: &Time) -> String {
    let (y, mo, d, h, mi, s, _) = parts(t);
    let zone = if t.offset == 0 {
        "Z".to_string()
    } else {
        offset_text(t.offset, true)
    };
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{zone}")
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// `formatdate(format, time)`: see Terraform's documentation for the verbs (`YYYY`, `MMM`,
/// `DD`, `EEE`, `hh`, `HH`, `AA`, `mm`, `ss`, `Z`...); quoted text is literal.
fn formatdate(a: Vec<Value>, _: &FunctionContext) -> Res {
    let spec = str_of(&a[0]);
    let t = parse_time(str_of(&a[1])).map_err(|m| arg_err(1, m))?;
    let (y, mo, d, h, mi, s, wd) = parts(&t);
    let chars: Vec<char> = spec.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            if chars.get(i + 1) == Some(&'\'') {
                out.push('\'');
                i += 2;
                continue;
            }
            i += 1;
            while i < chars.len() {
                if chars[i] == '\'' {
                    if chars.get(i + 1) == Some(&'\'') {
                        out.push('\'');
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                out.push(chars[i]);
                i += 1;
            }
            continue;
        }
        if !c.is_ascii_alphabetic() {
            out.push(c);
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && chars[i] == c {
            i += 1;
        }
        let n = i - start;
        let tok: String = chars[start..i].iter().collect();
        let bad = |why: &str| {
            let why = if why.is_empty() {
                String::new()
            } else {
                format!(": {why}")
            };
            arg_err(0, format!("invalid date format verb {}{why}", quote(&tok)))
        };
        let num = |v: i64, pad: bool| {
            if pad {
                format!("{v:02}")
            } else {
                v.to_string()
            }
        };
        match (c, n) {
            ('Y', 2) => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            ('Y', 4) => out.push_str(&format!("{y:04}")),
            ('Y', _) => return Err(bad("year must either be \"YY\" or \"YYYY\"")),
            ('M', 1 | 2) => out.push_str(&num(mo, n == 2)),
            ('M', 3) => out.push_str(&MONTHS[(mo - 1) as usize][..3]),
            ('M', 4) => out.push_str(MONTHS[(mo - 1) as usize]),
            ('M', _) => return Err(bad("month must be \"M\", \"MM\", \"MMM\", or \"MMMM\"")),
            ('D', 1 | 2) => out.push_str(&num(d, n == 2)),
            ('D', _) => return Err(bad("day of month must either be \"D\" or \"DD\"")),
            ('E', 3) => out.push_str(&DAYS[wd as usize][..3]),
            ('E', 4) => out.push_str(DAYS[wd as usize]),
            ('E', _) => return Err(bad("day of week must either be \"EEE\" or \"EEEE\"")),
            ('h', 1 | 2) => out.push_str(&num(h, n == 2)),
            ('h', _) => return Err(bad("24-hour must either be \"h\" or \"hh\"")),
            ('H', 1 | 2) => {
                let h12 = if h % 12 == 0 { 12 } else { h % 12 };
                out.push_str(&num(h12, n == 2))
            }
            ('H', _) => return Err(bad("12-hour must either be \"H\" or \"HH\"")),
            ('A' | 'a', 2) => {
                let pm = h >= 12;
                out.push_str(match (c == 'A', pm) {
                    (true, false) => "AM",
                    (true, true) => "PM",
                    (false, false) => "am",
                    (false, true) => "pm",
                });
            }
            ('A' | 'a', _) => return Err(bad(&format!("must be \"{c}{c}\""))),
            ('m', 1 | 2) => out.push_str(&num(mi, n == 2)),
            ('m', _) => return Err(bad("minute must either be \"m\" or \"mm\"")),
            ('s', 1 | 2) => out.push_str(&num(s, n == 2)),
            ('s', _) => return Err(bad("second must either be \"s\" or \"ss\"")),
            ('Z', 1) => out.push_str(&if t.offset == 0 {
                "Z".to_string()
            } else {
                offset_text(t.offset, true)
            }),
            ('Z', 3) => out.push_str(&if t.offset == 0 {
                "UTC".to_string()
            } else {
                offset_text(t.offset, false)
            }),
            ('Z', 4) => out.push_str(&offset_text(t.offset, false)),
            ('Z', 5) => out.push_str(&offset_text(t.offset, true)),
            ('Z', _) => return Err(bad("timezone must be Z, ZZZZ, or ZZZZZ")),
            _ => return Err(bad("")),
        }
    }
    Ok(Value::String(out))
}

/// Parses a Go duration into nanoseconds.
fn parse_duration(s: &str) -> Result<i128, String> {
    let invalid = || format!("time: invalid duration {}", quote(s));
    let mut rest = s;
    let neg = rest.starts_with('-');
    if let Some(r) = rest.strip_prefix('-').or_else(|| rest.strip_prefix('+')) {
        rest = r;
    }
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..num_end];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(invalid());
        }
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let scale: i128 = match unit {
            "" => return Err(format!("time: missing unit in duration {}", quote(s))),
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            other => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    quote(other),
                    quote(s)
                ))
            }
        };
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        let int: i128 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| invalid())?
        };
        let mut value = int.checked_mul(scale).ok_or_else(invalid)?;
        let mut place = scale;
        for d in frac.chars() {
            place /= 10;
            value += (d as i128 - '0' as i128) * place;
        }
        total = total.checked_add(value).ok_or_else(invalid)?;
    }
    Ok(if neg { -total } else { total })
}

/// `timeadd(timestamp, duration)`: the timestamp moved by the duration, in its own UTC
/// offset, at whole seconds.
fn timeadd(a: Vec<Value>, _: &FunctionContext) -> Res {
    let t = parse_time(str_of(&a[0])).map_err(call_err)?;
    let d = parse_duration(str_of(&a[1])).map_err(call_err)?;
    let total = t.secs as i128 * 1_000_000_000 + t.nanos as i128 + d;
    let secs = total.div_euclid(1_000_000_000);
    let nanos = total.rem_euclid(1_000_000_000) as u32;
    // RFC 3339 has four-digit years: 0000-01-01 to 9999-12-31.
    if !(-62_167_219_200..=253_402_300_799).contains(&secs) {
        return Err(call_err(
            "the resulting time is outside the years 0 to 9999 that RFC 3339 can write",
        ));
    }
    let secs = secs as i64;
    Ok(Value::String(rfc3339(&Time {
        secs,
        nanos,
        offset: t.offset,
    })))
}

/// `timecmp(timestamp_a, timestamp_b)`: -1, 0 or 1 as the instants compare (offsets taken
/// into account).
fn timecmp(a: Vec<Value>, _: &FunctionContext) -> Res {
    let x = parse_time(str_of(&a[0])).map_err(|m| arg_err(0, m))?;
    let y = parse_time(str_of(&a[1])).map_err(|m| arg_err(1, m))?;
    let ord = (x.secs, x.nanos).cmp(&(y.secs, y.nanos));
    Ok(Value::int(ord as i64))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::value::Type;

    #[test]
    fn formatting_dates() {
        // Expected values and messages from `terraform console` (1.11).
        let f = |spec: &str, t: &str, out: &str| check("formatdate", vec![s(spec), s(t)], s(out));
        f(
            "DD MMM YYYY hh:mm ZZZ",
            "2018-01-02T23:12:01Z",
            "02 Jan 2018 23:12 UTC",
        );
        f(
            "EEEE, DD-MMM-YY hh:mm:ss ZZZ",
            "2018-01-02T23:12:01-08:00",
            "Tuesday, 02-Jan-18 23:12:01 -0800",
        );
        f(
            "EEE, DD MMM YYYY hh:mm:ss ZZZZ ZZZZZ Z",
            "2018-01-02T23:12:01.5+05:30",
            "Tue, 02 Jan 2018 23:12:01 +0530 +05:30 +05:30",
        );
        f(
            "h:mm aa AA 'o''clock' M/D/YY H",
            "2018-01-02T03:04:05Z",
            "3:04 am AM o'clock 1/2/18 3",
        );
        f("ss s m", "2018-01-02T23:12:01Z", "01 1 12");
        check_err(
            "formatdate",
            vec![s("x"), s("nope")],
            "Invalid value for \"time\" parameter: not a valid RFC3339 timestamp: cannot use \
             \"nope\" as year.",
        );
        check_err(
            "formatdate",
            vec![s("YYYYY"), s("2018-01-02T23:12:01Z")],
            "Invalid value for \"format\" parameter: invalid date format verb \"YYYYY\": year \
             must either be \"YY\" or \"YYYY\".",
        );
        check(
            "formatdate",
            vec![s("YYYY"), unk(Type::String)],
            unk(Type::String),
        );
    }

    #[test]
    fn adding_and_comparing() {
        let f = |t: &str, d: &str, out: &str| check("timeadd", vec![s(t), s(d)], s(out));
        f("2017-11-22T00:00:00Z", "10m", "2017-11-22T00:10:00Z");
        f(
            "2017-11-22T00:00:00+01:00",
            "-1.5h",
            "2017-11-21T22:30:00+01:00",
        );
        f(
            "2017-11-22T00:00:00.25Z",
            "1h2m3.5s",
            "2017-11-22T01:02:03Z",
        );
        f("2016-02-28T23:00:00Z", "2h", "2016-02-29T01:00:00Z");
        check_err(
            "timeadd",
            vec![s("2017-11-22T00:00:00Z"), s("1d")],
            "Call to function \"timeadd\" failed: time: unknown unit \"d\" in duration \"1d\".",
        );
        check(
            "timecmp",
            vec![s("2017-11-22T00:00:00Z"), s("2017-11-22T01:00:00+01:00")],
            n(0),
        );
        check_err(
            "timeadd",
            vec![s("2017-11-22T00:00:00Z"), s("2562047788015215h")],
            "Call to function \"timeadd\" failed: the resulting time is outside the years 0 \
             to 9999 that RFC 3339 can write.",
        );
        check(
            "timecmp",
            vec![s("2017-11-22T00:00:00Z"), s("2017-11-23T00:00:00Z")],
            n(-1),
        );
    }
}
