//! Network functions: cidrhost, cidrnetmask, cidrsubnet, cidrsubnets, for IPv4 and IPv6.
//!
//! Addresses are held as `u128` with their width (32 or 128 bits), so one implementation
//! serves both families. Prefixes are parsed as Terraform parses them (IPv4 octets may have
//! leading zeros, which are decimal); the address is masked to the prefix before use.
//! Subnet allocation in `cidrsubnets` follows Terraform's: each subnet starts right after the
//! previous one, aligned to its own size. Any unknown argument gives an unknown result.

use super::{arg_err, call_err, int_arg, p, str_of, Def, Fail, FunctionContext, Res, Ret, P};
use crate::value::Value;
use std::net::{Ipv4Addr, Ipv6Addr};

pub(super) const DEFS: &[Def] = &[
    Def {
        name: "cidrhost",
        params: &[p("prefix", P::Str), p("hostnum", P::Num)],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: cidrhost,
    },
    Def {
        name: "cidrnetmask",
        params: &[p("prefix", P::Str)],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: cidrnetmask,
    },
    Def {
        name: "cidrsubnet",
        params: &[
            p("prefix", P::Str),
            p("newbits", P::Num),
            p("netnum", P::Num),
        ],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: cidrsubnet,
    },
    Def {
        name: "cidrsubnets",
        params: &[p("prefix", P::Str)],
        variadic: Some(p("newbits", P::Num)),
        ret: Ret::Fixed(P::List(&P::Str)),
        imp: cidrsubnets,
    },
];

/// A network: address (masked), prefix length, and address width in bits.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Net {
    addr: u128,
    len: u32,
    bits: u32,
}

fn mask(len: u32, bits: u32) -> u128 {
    let all = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    if len == 0 {
        0
    } else {
        all & !(all >> len)
    }
}

fn host_mask(len: u32, bits: u32) -> u128 {
    let all = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    all & !mask(len, bits)
}

fn parse_v4(s: &str) -> Option<u128> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut v: u128 = 0;
    for part in parts {
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let o: u32 = part.parse().ok()?;
        if o > 255 {
            return None;
        }
        v = (v << 8) | o as u128;
    }
    Some(v)
}

fn parse_cidr(s: &str) -> Result<Net, String> {
    let invalid = || format!("invalid CIDR expression: invalid CIDR address: {s}");
    let (ip, len) = s.split_once('/').ok_or_else(invalid)?;
    if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) || len.len() > 3 {
        return Err(invalid());
    }
    let len: u32 = len.parse().map_err(|_| invalid())?;
    let (addr, bits) = if let Some(v4) = parse_v4(ip) {
        (v4, 32)
    } else if let Ok(v6) = ip.parse::<Ipv6Addr>() {
        (u128::from(v6), 128)
    } else {
        return Err(invalid());
    };
    if len > bits {
        return Err(invalid());
    }
    Ok(Net {
        addr: addr & mask(len, bits),
        len,
        bits,
    })
}

fn ip_string(addr: u128, bits: u32) -> String {
    if bits == 32 {
        Ipv4Addr::from(addr as u32).to_string()
    } else {
        Ipv6Addr::from(addr).to_string()
    }
}

fn net_string(n: &Net) -> String {
    format!("{}/{}", ip_string(n.addr, n.bits), n.len)
}

fn prefix_arg(v: &Value) -> Result<Net, Fail> {
    parse_cidr(str_of(v)).map_err(|m| arg_err(0, m))
}

/// `cidrhost(prefix, hostnum)`: the address of host `hostnum` in the network; negative numbers
/// count back from the last address.
fn cidrhost(a: Vec<Value>, _: &FunctionContext) -> Res {
    let net = prefix_arg(&a[0])?;
    let num = int_arg(1, &a[1], "host number")?;
    let host_bits = net.bits - net.len;
    let max: u128 = host_mask(net.len, net.bits);
    let mag = num.unsigned_abs() as u128;
    let offset = if num < 0 { mag - 1 } else { mag };
    if host_bits < 64 && offset > max {
        return Err(call_err(format!(
            "prefix of {} does not accommodate a host numbered {}",
            net.len, num
        )));
    }
    let host = if num < 0 { max - offset } else { offset };
    Ok(Value::String(ip_string(net.addr | host, net.bits)))
}

/// `cidrnetmask(prefix)`: the dotted netmask of an IPv4 network.
fn cidrnetmask(a: Vec<Value>, _: &FunctionContext) -> Res {
    let net = parse_cidr(str_of(&a[0])).map_err(call_err)?;
    if net.bits != 32 {
        return Err(call_err(format!(
            "IPv6 addresses cannot have a netmask: {}",
            str_of(&a[0])
        )));
    }
    Ok(Value::String(ip_string(mask(net.len, 32), 32)))
}

fn subnet(net: &Net, newbits: i64, netnum: i64) -> Result<Net, String> {
    let new_len = (net.len as i64).saturating_add(newbits);
    if newbits < 0 || new_len > net.bits as i64 {
        return Err(format!(
            "insufficient address space to extend prefix of {} by {}",
            net.len, newbits
        ));
    }
    let new_len = new_len as u32;
    if netnum < 0 || (newbits < 64 && (netnum as u128) >= (1u128 << newbits)) {
        return Err(format!(
            "prefix extension of {newbits} does not accommodate a subnet numbered {netnum}"
        ));
    }
    let shift = net.bits - new_len;
    let offset = if shift >= 128 {
        0
    } else {
        (netnum as u128) << shift
    };
    Ok(Net {
        addr: net.addr | offset,
        len: new_len,
        bits: net.bits,
    })
}

/// `cidrsubnet(prefix, newbits, netnum)`: subnet number `netnum` of the network extended by
/// `newbits` bits.
fn cidrsubnet(a: Vec<Value>, _: &FunctionContext) -> Res {
    let net = prefix_arg(&a[0])?;
    let newbits = int_arg(1, &a[1], "newbits")?;
    let netnum = int_arg(2, &a[2], "netnum")?;
    let sub = subnet(&net, newbits, netnum).map_err(call_err)?;
    Ok(Value::String(net_string(&sub)))
}

/// `cidrsubnets(prefix, newbits...)`: consecutive subnets of the given sizes, each aligned to
/// its size.
fn cidrsubnets(a: Vec<Value>, _: &FunctionContext) -> Res {
    let net = prefix_arg(&a[0])?;
    let all = |len: u32| mask(len, net.bits) | host_mask(len, net.bits);
    let width_mask = all(0);
    let mut out = Vec::new();
    let mut current: Option<Net> = None;
    for (i, v) in a.iter().enumerate().skip(1) {
        let newbits = int_arg(i, v, "newbits")?;
        if newbits < 1 {
            return Err(arg_err(i, "must extend prefix by at least one bit"));
        }
        if newbits > 32 {
            return Err(arg_err(i, "may not extend prefix by more than 32 bits"));
        }
        let len = net.len + newbits as u32;
        if len > net.bits {
            let proto = if net.bits == 32 { "IPv4" } else { "IPv6" };
            return Err(arg_err(
                i,
                format!(
                    "would extend prefix to {len} bits, which is too long for an {proto} address"
                ),
            ));
        }
        // The first subnet starts at the network's own address: begin from the subnet of this
        // size just before it.
        let cur = current.unwrap_or_else(|| {
            let before = net.addr.wrapping_sub(1) & width_mask;
            Net {
                addr: before & mask(len, net.bits),
                len,
                bits: net.bits,
            }
        });
        let cur_last = cur.addr | host_mask(cur.len, net.bits);
        let sub = cur_last & mask(len, net.bits);
        let sub_last = sub | host_mask(len, net.bits);
        let next_addr = sub_last.wrapping_add(1) & width_mask;
        let rollover = next_addr == 0;
        let next = Net {
            addr: next_addr & mask(len, net.bits),
            len,
            bits: net.bits,
        };
        let contained = (next.addr & mask(net.len, net.bits)) == net.addr;
        if rollover || !contained {
            return Err(arg_err(
                i,
                format!(
                    "not enough remaining address space for a subnet with a prefix of {len} \
                     bits after {}",
                    net_string(&cur)
                ),
            ));
        }
        out.push(Value::String(net_string(&next)));
        current = Some(next);
    }
    Ok(Value::List(out))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::value::Type;

    #[test]
    fn hosts_and_masks() {
        // Expected values and messages from `terraform console` (1.11).
        check(
            "cidrhost",
            vec![s("10.12.112.0/20"), n(16)],
            s("10.12.112.16"),
        );
        check(
            "cidrhost",
            vec![s("10.12.112.0/20"), n(-1)],
            s("10.12.127.255"),
        );
        check("cidrhost", vec![s("010.0.0.0/8"), n(1)], s("10.0.0.1"));
        check(
            "cidrhost",
            vec![s("fd00:fd12:3456:7890::/56"), n(16)],
            s("fd00:fd12:3456:7800::10"),
        );
        check_err(
            "cidrhost",
            vec![s("10.12.112.0/20"), n(5000)],
            "Call to function \"cidrhost\" failed: prefix of 20 does not accommodate a host \
             numbered 5000.",
        );
        check("cidrnetmask", vec![s("172.16.0.0/12")], s("255.240.0.0"));
        check_err(
            "cidrnetmask",
            vec![s("fd00::/56")],
            "Call to function \"cidrnetmask\" failed: IPv6 addresses cannot have a netmask: \
             fd00::/56.",
        );
        check_err(
            "cidrnetmask",
            vec![s("x")],
            "Call to function \"cidrnetmask\" failed: invalid CIDR expression: invalid CIDR \
             address: x.",
        );
        check("cidrhost", vec![unk(Type::String), n(1)], unk(Type::String));
    }

    #[test]
    fn subnets() {
        check(
            "cidrsubnet",
            vec![s("172.16.0.0/12"), n(4), n(2)],
            s("172.18.0.0/16"),
        );
        check(
            "cidrsubnet",
            vec![s("10.1.2.0/24"), n(4), n(15)],
            s("10.1.2.240/28"),
        );
        check(
            "cidrsubnet",
            vec![s("fd00:fd12:3456:7890::/56"), n(16), n(162)],
            s("fd00:fd12:3456:7800:a200::/72"),
        );
        check_err(
            "cidrsubnet",
            vec![s("10.1.2.0/24"), n(4), n(16)],
            "Call to function \"cidrsubnet\" failed: prefix extension of 4 does not accommodate \
             a subnet numbered 16.",
        );
        check_err(
            "cidrsubnet",
            vec![s("10.1.2.0/24"), n(10), n(1)],
            "Call to function \"cidrsubnet\" failed: insufficient address space to extend \
             prefix of 24 by 10.",
        );
        check(
            "cidrsubnets",
            vec![s("10.1.0.0/16"), n(4), n(4), n(8), n(4)],
            slist(&[
                "10.1.0.0/20",
                "10.1.16.0/20",
                "10.1.32.0/24",
                "10.1.48.0/20",
            ]),
        );
        check(
            "cidrsubnets",
            vec![s("fd00:fd12:3456:7890::/56"), n(16), n(16), n(16), n(32)],
            slist(&[
                "fd00:fd12:3456:7800::/72",
                "fd00:fd12:3456:7800:100::/72",
                "fd00:fd12:3456:7800:200::/72",
                "fd00:fd12:3456:7800:300::/88",
            ]),
        );
        check_err(
            "cidrsubnets",
            vec![s("10.1.0.0/16"), n(1), n(1), n(1)],
            "Invalid value for \"newbits\" parameter: not enough remaining address space for a \
             subnet with a prefix of 17 bits after 10.1.128.0/17.",
        );
        check_err(
            "cidrsubnets",
            vec![s("10.1.0.0/16"), n(0)],
            "Invalid value for \"newbits\" parameter: must extend prefix by at least one bit.",
        );
        check("cidrsubnets", vec![s("10.0.0.0/8")], list(vec![]));
        // Terraform cannot allocate from a network that starts at the all-zeros address (its
        // search starts from the address before it, which wraps around); Cairn does the same.
        check_err(
            "cidrsubnets",
            vec![s("0.0.0.0/8"), n(4)],
            "Invalid value for \"newbits\" parameter: not enough remaining address space for a \
             subnet with a prefix of 12 bits after 255.240.0.0/12.",
        );
    }
}
