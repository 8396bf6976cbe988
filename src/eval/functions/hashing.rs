//! Hash functions: md5, sha1, sha256, sha512, base64sha256, base64sha512, uuidv5, bcrypt;
//! and rsadecrypt.
//!
//! Hashes are of the string's UTF-8 bytes, written in lowercase hex (or Base64 for the
//! `base64*` forms). Any unknown argument gives an unknown string.

use super::{arg_err, call_err, p, str_of, Def, FunctionContext, Res, Ret, P};
use crate::value::Value;
use base64::Engine as _;
use md5::Digest as _;

const STR: &[super::Param] = &[p("str", P::Str)];

pub(super) const DEFS: &[Def] = &[
    Def {
        name: "md5",
        params: STR,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: md5,
    },
    Def {
        name: "sha1",
        params: STR,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: sha1,
    },
    Def {
        name: "sha256",
        params: STR,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: sha256,
    },
    Def {
        name: "sha512",
        params: STR,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: sha512,
    },
    Def {
        name: "base64sha256",
        params: STR,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: base64sha256,
    },
    Def {
        name: "base64sha512",
        params: STR,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: base64sha512,
    },
    Def {
        name: "uuidv5",
        params: &[p("namespace", P::Str), p("name", P::Str)],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: uuidv5,
    },
    Def {
        name: "bcrypt",
        params: STR,
        variadic: Some(p("cost", P::Num)),
        ret: Ret::Fixed(P::Str),
        imp: bcrypt,
    },
    Def {
        name: "rsadecrypt",
        params: &[p("ciphertext", P::Str), p("privatekey", P::Str)],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: rsadecrypt,
    },
];

/// `bcrypt(str, cost?)`: a `$2a$` hash with a random salt, as Go's `x/crypto/bcrypt` makes
/// it for Terraform: cost 10 by default, a cost below 4 means 10, above 31 is an error, and
/// a password longer than 72 bytes is refused rather than truncated.
fn bcrypt(a: Vec<Value>, _: &FunctionContext) -> Res {
    if a.len() > 2 {
        return Err(call_err("bcrypt() takes no more than two arguments"));
    }
    let cost = match a.get(1) {
        None => 10,
        Some(v) => {
            let n = v
                .as_number()
                .and_then(|n| n.to_i64())
                .ok_or_else(|| arg_err(1, "number must be a whole number"))?;
            if n < 4 {
                10
            } else if n > 31 {
                return Err(call_err(format!(
                    "error occured generating password crypto/bcrypt: cost {n} is outside \
                     allowed range (4,31)"
                )));
            } else {
                n as u32
            }
        }
    };
    let password = str_of(&a[0]);
    if password.len() > 72 {
        return Err(call_err(
            "error occured generating password bcrypt: password length exceeds 72 bytes",
        ));
    }
    let parts = ::bcrypt::hash_with_result(password, cost)
        .map_err(|e| call_err(format!("error occured generating password {e}")))?;
    Ok(Value::String(
        parts.format_for_version(::bcrypt::Version::TwoA),
    ))
}

/// `rsadecrypt(ciphertext, privatekey)`: RSA PKCS #1 v1.5 decryption of Base64 ciphertext
/// with a PEM private key (PKCS #1 `RSA PRIVATE KEY` or PKCS #8 `PRIVATE KEY`).
fn rsadecrypt(a: Vec<Value>, _: &FunctionContext) -> Res {
    use rsa::pkcs1::DecodeRsaPrivateKey as _;
    use rsa::pkcs8::DecodePrivateKey as _;
    let text = str_of(&a[0]);
    let cipher = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| {
            arg_err(
                0,
                format!(
                    "failed to decode input {}: cipher text must be base64-encoded",
                    crate::eval::convert::quote(text)
                ),
            )
        })?;
    let pem = str_of(&a[1]);
    let key = rsa::RsaPrivateKey::from_pkcs1_pem(pem)
        .or_else(|_| rsa::RsaPrivateKey::from_pkcs8_pem(pem))
        .map_err(|_| {
            arg_err(
                1,
                if pem.contains("-----BEGIN") {
                    "invalid private key: not an RSA private key in PEM form".to_string()
                } else {
                    "invalid private key: ssh: no key found".to_string()
                },
            )
        })?;
    let plain = key
        .decrypt(rsa::Pkcs1v15Encrypt, &cipher)
        .map_err(|e| call_err(format!("failed to decrypt: {e}")))?;
    String::from_utf8(plain)
        .map(Value::String)
        .map_err(|_| call_err("the decrypted text is not valid UTF-8"))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub(crate) fn md5_bytes(data: &[u8]) -> Vec<u8> {
    md5::Md5::digest(data).to_vec()
}
pub(crate) fn sha1_bytes(data: &[u8]) -> Vec<u8> {
    sha1::Sha1::digest(data).to_vec()
}
pub(crate) fn sha256_bytes(data: &[u8]) -> Vec<u8> {
    sha2::Sha256::digest(data).to_vec()
}
pub(crate) fn sha512_bytes(data: &[u8]) -> Vec<u8> {
    sha2::Sha512::digest(data).to_vec()
}

/// `md5(str)`
fn md5(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(Value::String(hex(&md5_bytes(str_of(&a[0]).as_bytes()))))
}
/// `sha1(str)`
fn sha1(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(Value::String(hex(&sha1_bytes(str_of(&a[0]).as_bytes()))))
}
/// `sha256(str)`
fn sha256(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(Value::String(hex(&sha256_bytes(str_of(&a[0]).as_bytes()))))
}
/// `sha512(str)`
fn sha512(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(Value::String(hex(&sha512_bytes(str_of(&a[0]).as_bytes()))))
}
/// `base64sha256(str)`: the raw SHA-256 digest in Base64.
fn base64sha256(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(Value::String(b64(&sha256_bytes(str_of(&a[0]).as_bytes()))))
}
/// `base64sha512(str)`: the raw SHA-512 digest in Base64.
fn base64sha512(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(Value::String(b64(&sha512_bytes(str_of(&a[0]).as_bytes()))))
}

/// `uuidv5(namespace, name)`: a name-based UUID; the namespace is `dns`, `url`, `oid`, `x500`
/// or a UUID.
fn uuidv5(a: Vec<Value>, _: &FunctionContext) -> Res {
    let ns = str_of(&a[0]);
    let namespace = match ns {
        "dns" => uuid::Uuid::NAMESPACE_DNS,
        "url" => uuid::Uuid::NAMESPACE_URL,
        "oid" => uuid::Uuid::NAMESPACE_OID,
        "x500" => uuid::Uuid::NAMESPACE_X500,
        other => uuid::Uuid::parse_str(other).map_err(|_| {
            let why = if matches!(other.len(), 32 | 36 | 38 | 41 | 45) {
                "invalid UUID format".to_string()
            } else {
                format!("invalid UUID length: {}", other.len())
            };
            call_err(format!(
                "uuidv5() doesn't support namespace {other} ({why})"
            ))
        })?,
    };
    Ok(Value::String(
        uuid::Uuid::new_v5(&namespace, str_of(&a[1]).as_bytes()).to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::value::Type;

    #[test]
    fn hashes() {
        check(
            "md5",
            vec![s("hello world")],
            s("5eb63bbbe01eeed093cb22bb8f5acdc3"),
        );
        check(
            "sha1",
            vec![s("hello world")],
            s("2aae6c35c94fcfb415dbe95f408b9ce91ee846ed"),
        );
        check(
            "sha256",
            vec![s("hello world")],
            s("b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"),
        );
        check(
            "sha512",
            vec![s("hello world")],
            s(
                "309ecc489c12d6eb4cc40f50c902f2b4d0ed77ee511a7c7a9bcd3ca86d4cd86f\
               989dd35bc5ff499670da34255b45b0cfd830e81f605dcf7dc5542e93ae9cd76f",
            ),
        );
        check(
            "base64sha256",
            vec![s("hello world")],
            s("uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek="),
        );
        check(
            "base64sha512",
            vec![s("hello world")],
            s("MJ7MSJwS1utMxA9QyQLytNDtd+5RGnx6m808qG1M2G+YndNbxf9JlnDaNCVbRbDP2DDoH2Bdz33FVC6TrpzXbw=="),
        );
        check("md5", vec![unk(Type::String)], unk(Type::String));
        check(
            "md5",
            vec![s("x").sensitive()],
            s("9dd4e461268c8034f5c8564e155c67a6").sensitive(),
        );
    }

    #[test]
    fn uuids() {
        // From `terraform console` (1.11).
        check(
            "uuidv5",
            vec![s("dns"), s("example.com")],
            s("cfbff0d1-9375-5685-968c-48ce8b15ae17"),
        );
        check(
            "uuidv5",
            vec![s("6ba7b810-9dad-11d1-80b4-00c04fd430c8"), s("example.com")],
            s("cfbff0d1-9375-5685-968c-48ce8b15ae17"),
        );
        check_err(
            "uuidv5",
            vec![s("x"), s("a")],
            "Call to function \"uuidv5\" failed: uuidv5() doesn't support namespace x (invalid \
             UUID length: 1).",
        );
    }
}
