//! The descriptions of the built-in functions, for `metadata functions -json`: each function's
//! description and its parameters' (positional, then the variadic one), as Terraform 1.5.7's
//! `internal/lang/funcs/descriptions.go` words them.
//!
//! Copyright (c) HashiCorp, Inc. — SPDX-License-Identifier: MPL-2.0 (the text is taken from
//! Terraform 1.5.7, published under the Mozilla Public License 2.0; this file stays under it).
//! The entries for functions Terraform added after 1.5.7 (`ephemeralasnull`, `issensitive`,
//! `templatestring`) are Cairn's own words.

/// (name, description, parameter descriptions).
pub(crate) const DESCRIPTIONS: &[(&str, &str, &[&str])] = &[
    (
        "abs",
        "`abs` returns the absolute value of the given number. In other words, if the number is zero or positive then it is returned as-is, but if it is negative then it is multiplied by -1 to make it positive before returning it.",
        &[""],
    ),
    (
        "abspath",
        "`abspath` takes a string containing a filesystem path and converts it to an absolute path. That is, if the path is not absolute, it will be joined with the current working directory.",
        &[""],
    ),
    (
        "alltrue",
        "`alltrue` returns `true` if all elements in a given collection are `true` or `\"true\"`. It also returns `true` if the collection is empty.",
        &[""],
    ),
    (
        "anytrue",
        "`anytrue` returns `true` if any element in a given collection is `true` or `\"true\"`. It also returns `false` if the collection is empty.",
        &[""],
    ),
    (
        "base64decode",
        "`base64decode` takes a string containing a Base64 character sequence and returns the original string.",
        &[""],
    ),
    (
        "base64encode",
        "`base64encode` applies Base64 encoding to a string.",
        &[""],
    ),
    (
        "base64gzip",
        "`base64gzip` compresses a string with gzip and then encodes the result in Base64 encoding.",
        &[""],
    ),
    (
        "base64sha256",
        "`base64sha256` computes the SHA256 hash of a given string and encodes it with Base64. This is not equivalent to `base64encode(sha256(\"test\"))` since `sha256()` returns hexadecimal representation.",
        &[""],
    ),
    (
        "base64sha512",
        "`base64sha512` computes the SHA512 hash of a given string and encodes it with Base64. This is not equivalent to `base64encode(sha512(\"test\"))` since `sha512()` returns hexadecimal representation.",
        &[""],
    ),
    (
        "basename",
        "`basename` takes a string containing a filesystem path and removes all except the last portion from it.",
        &[""],
    ),
    (
        "bcrypt",
        "`bcrypt` computes a hash of the given string using the Blowfish cipher, returning a string in [the _Modular Crypt Format_](https://passlib.readthedocs.io/en/stable/modular_crypt_format.html) usually expected in the shadow password file on many Unix systems.",
        &["", "The `cost` argument is optional and will default to 10 if unspecified."],
    ),
    (
        "can",
        "`can` evaluates the given expression and returns a boolean value indicating whether the expression produced a result without any errors.",
        &[""],
    ),
    (
        "ceil",
        "`ceil` returns the closest whole number that is greater than or equal to the given value, which may be a fraction.",
        &[""],
    ),
    (
        "chomp",
        "`chomp` removes newline characters at the end of a string.",
        &[""],
    ),
    (
        "chunklist",
        "`chunklist` splits a single list into fixed-size chunks, returning a list of lists.",
        &["", "The maximum length of each chunk. All but the last element of the result is guaranteed to be of exactly this size."],
    ),
    (
        "cidrhost",
        "`cidrhost` calculates a full host IP address for a given host number within a given IP network address prefix.",
        &["`prefix` must be given in CIDR notation, as defined in [RFC 4632 section 3.1](https://tools.ietf.org/html/rfc4632#section-3.1).", "`hostnum` is a whole number that can be represented as a binary integer with no more than the number of digits remaining in the address after the given prefix."],
    ),
    (
        "cidrnetmask",
        "`cidrnetmask` converts an IPv4 address prefix given in CIDR notation into a subnet mask address.",
        &["`prefix` must be given in CIDR notation, as defined in [RFC 4632 section 3.1](https://tools.ietf.org/html/rfc4632#section-3.1)."],
    ),
    (
        "cidrsubnet",
        "`cidrsubnet` calculates a subnet address within given IP network address prefix.",
        &["`prefix` must be given in CIDR notation, as defined in [RFC 4632 section 3.1](https://tools.ietf.org/html/rfc4632#section-3.1).", "`newbits` is the number of additional bits with which to extend the prefix.", "`netnum` is a whole number that can be represented as a binary integer with no more than `newbits` binary digits, which will be used to populate the additional bits added to the prefix."],
    ),
    (
        "cidrsubnets",
        "`cidrsubnets` calculates a sequence of consecutive IP address ranges within a particular CIDR prefix.",
        &["`prefix` must be given in CIDR notation, as defined in [RFC 4632 section 3.1](https://tools.ietf.org/html/rfc4632#section-3.1).", ""],
    ),
    (
        "coalesce",
        "`coalesce` takes any number of arguments and returns the first one that isn't null or an empty string.",
        &[""],
    ),
    (
        "coalescelist",
        "`coalescelist` takes any number of list arguments and returns the first one that isn't empty.",
        &["List or tuple values to test in the given order."],
    ),
    (
        "compact",
        "`compact` takes a list of strings and returns a new list with any empty string elements removed.",
        &[""],
    ),
    (
        "concat",
        "`concat` takes two or more lists and combines them into a single list.",
        &[""],
    ),
    (
        "contains",
        "`contains` determines whether a given list or set contains a given single value as one of its elements.",
        &["", ""],
    ),
    (
        "csvdecode",
        "`csvdecode` decodes a string containing CSV-formatted data and produces a list of maps representing that data.",
        &[""],
    ),
    (
        "dirname",
        "`dirname` takes a string containing a filesystem path and removes the last portion from it.",
        &[""],
    ),
    (
        "distinct",
        "`distinct` takes a list and returns a new list with any duplicate elements removed.",
        &[""],
    ),
    (
        "element",
        "`element` retrieves a single element from a list.",
        &["", ""],
    ),
    (
        "endswith",
        "`endswith` takes two values: a string to check and a suffix string. The function returns true if the first string ends with that exact suffix.",
        &["", ""],
    ),
    (
        "ephemeralasnull",
        "`ephemeralasnull` returns its argument with every ephemeral value in it replaced by a null of the same type; other values are kept as they are.",
        &[""],
    ),
    (
        "file",
        "`file` reads the contents of a file at the given path and returns them as a string.",
        &[""],
    ),
    (
        "filebase64",
        "`filebase64` reads the contents of a file at the given path and returns them as a base64-encoded string.",
        &[""],
    ),
    (
        "filebase64sha256",
        "`filebase64sha256` is a variant of `base64sha256` that hashes the contents of a given file rather than a literal string.",
        &[""],
    ),
    (
        "filebase64sha512",
        "`filebase64sha512` is a variant of `base64sha512` that hashes the contents of a given file rather than a literal string.",
        &[""],
    ),
    (
        "fileexists",
        "`fileexists` determines whether a file exists at a given path.",
        &[""],
    ),
    (
        "filemd5",
        "`filemd5` is a variant of `md5` that hashes the contents of a given file rather than a literal string.",
        &[""],
    ),
    (
        "fileset",
        "`fileset` enumerates a set of regular file names given a path and pattern. The path is automatically removed from the resulting set of file names and any result still containing path separators always returns forward slash (`/`) as the path separator for cross-system compatibility.",
        &["", ""],
    ),
    (
        "filesha1",
        "`filesha1` is a variant of `sha1` that hashes the contents of a given file rather than a literal string.",
        &[""],
    ),
    (
        "filesha256",
        "`filesha256` is a variant of `sha256` that hashes the contents of a given file rather than a literal string.",
        &[""],
    ),
    (
        "filesha512",
        "`filesha512` is a variant of `sha512` that hashes the contents of a given file rather than a literal string.",
        &[""],
    ),
    (
        "flatten",
        "`flatten` takes a list and replaces any elements that are lists with a flattened sequence of the list contents.",
        &[""],
    ),
    (
        "floor",
        "`floor` returns the closest whole number that is less than or equal to the given value, which may be a fraction.",
        &[""],
    ),
    (
        "format",
        "The `format` function produces a string by formatting a number of other values according to a specification string. It is similar to the `printf` function in C, and other similar functions in other programming languages.",
        &["", ""],
    ),
    (
        "formatdate",
        "`formatdate` converts a timestamp into a different time format.",
        &["", ""],
    ),
    (
        "formatlist",
        "`formatlist` produces a list of strings by formatting a number of other values according to a specification string.",
        &["", ""],
    ),
    (
        "indent",
        "`indent` adds a given number of spaces to the beginnings of all but the first line in a given multi-line string.",
        &["Number of spaces to add after each newline character.", ""],
    ),
    (
        "index",
        "`index` finds the element index for a given value in a list.",
        &["", ""],
    ),
    (
        "issensitive",
        "`issensitive` returns `true` when the given value is marked sensitive, `false` otherwise.",
        &[""],
    ),
    (
        "join",
        "`join` produces a string by concatenating together all elements of a given list of strings with the given delimiter.",
        &["Delimiter to insert between the given strings.", "One or more lists of strings to join."],
    ),
    (
        "jsondecode",
        "`jsondecode` interprets a given string as JSON, returning a representation of the result of decoding that string.",
        &[""],
    ),
    (
        "jsonencode",
        "`jsonencode` encodes a given value to a string using JSON syntax.",
        &[""],
    ),
    (
        "keys",
        "`keys` takes a map and returns a list containing the keys from that map.",
        &["The map to extract keys from. May instead be an object-typed value, in which case the result is a tuple of the object attributes."],
    ),
    (
        "length",
        "`length` determines the length of a given list, map, or string.",
        &[""],
    ),
    (
        "list",
        "The `list` function is no longer available. Prior to Terraform v0.12 it was the only available syntax for writing a literal list inside an expression, but Terraform v0.12 introduced a new first-class syntax.",
        &[""],
    ),
    (
        "log",
        "`log` returns the logarithm of a given number in a given base.",
        &["", ""],
    ),
    (
        "lookup",
        "`lookup` retrieves the value of a single element from a map, given its key. If the given key does not exist, the given default value is returned instead.",
        &["", "", ""],
    ),
    (
        "lower",
        "`lower` converts all cased letters in the given string to lowercase.",
        &[""],
    ),
    (
        "map",
        "The `map` function is no longer available. Prior to Terraform v0.12 it was the only available syntax for writing a literal map inside an expression, but Terraform v0.12 introduced a new first-class syntax.",
        &[""],
    ),
    (
        "matchkeys",
        "`matchkeys` constructs a new list by taking a subset of elements from one list whose indexes match the corresponding indexes of values in another list.",
        &["", "", ""],
    ),
    (
        "max",
        "`max` takes one or more numbers and returns the greatest number from the set.",
        &[""],
    ),
    (
        "md5",
        "`md5` computes the MD5 hash of a given string and encodes it with hexadecimal digits.",
        &[""],
    ),
    (
        "merge",
        "`merge` takes an arbitrary number of maps or objects, and returns a single map or object that contains a merged set of elements from all arguments.",
        &[""],
    ),
    (
        "min",
        "`min` takes one or more numbers and returns the smallest number from the set.",
        &[""],
    ),
    (
        "nonsensitive",
        "`nonsensitive` takes a sensitive value and returns a copy of that value with the sensitive marking removed, thereby exposing the sensitive value.",
        &[""],
    ),
    (
        "one",
        "`one` takes a list, set, or tuple value with either zero or one elements. If the collection is empty, `one` returns `null`. Otherwise, `one` returns the first element. If there are two or more elements then `one` will return an error.",
        &[""],
    ),
    (
        "parseint",
        "`parseint` parses the given string as a representation of an integer in the specified base and returns the resulting number. The base must be between 2 and 62 inclusive.",
        &["", ""],
    ),
    (
        "pathexpand",
        "`pathexpand` takes a filesystem path that might begin with a `~` segment, and if so it replaces that segment with the current user's home directory path.",
        &[""],
    ),
    (
        "plantimestamp",
        "`plantimestamp` returns a UTC timestamp string in [RFC 3339](https://tools.ietf.org/html/rfc3339) format, fixed to a constant time representing the time of the plan.",
        &[],
    ),
    (
        "pow",
        "`pow` calculates an exponent, by raising its first argument to the power of the second argument.",
        &["", ""],
    ),
    (
        "range",
        "`range` generates a list of numbers using a start value, a limit value, and a step value.",
        &[""],
    ),
    (
        "regex",
        "`regex` applies a [regular expression](https://en.wikipedia.org/wiki/Regular_expression) to a string and returns the matching substrings.",
        &["", ""],
    ),
    (
        "regexall",
        "`regexall` applies a [regular expression](https://en.wikipedia.org/wiki/Regular_expression) to a string and returns a list of all matches.",
        &["", ""],
    ),
    (
        "replace",
        "`replace` searches a given string for another given substring, and replaces each occurrence with a given replacement string.",
        &["", "", ""],
    ),
    (
        "reverse",
        "`reverse` takes a sequence and produces a new sequence of the same length with all of the same elements as the given sequence but in reverse order.",
        &[""],
    ),
    (
        "rsadecrypt",
        "`rsadecrypt` decrypts an RSA-encrypted ciphertext, returning the corresponding cleartext.",
        &["", ""],
    ),
    (
        "sensitive",
        "`sensitive` takes any value and returns a copy of it marked so that Terraform will treat it as sensitive, with the same meaning and behavior as for [sensitive input variables](/language/values/variables#suppressing-values-in-cli-output).",
        &[""],
    ),
    (
        "setintersection",
        "The `setintersection` function takes multiple sets and produces a single set containing only the elements that all of the given sets have in common. In other words, it computes the [intersection](https://en.wikipedia.org/wiki/Intersection_\\(set_theory\\)) of the sets.",
        &["", ""],
    ),
    (
        "setproduct",
        "The `setproduct` function finds all of the possible combinations of elements from all of the given sets by computing the [Cartesian product](https://en.wikipedia.org/wiki/Cartesian_product).",
        &["The sets to consider. Also accepts lists and tuples, and if all arguments are of list or tuple type then the result will preserve the input ordering"],
    ),
    (
        "setsubtract",
        "The `setsubtract` function returns a new set containing the elements from the first set that are not present in the second set. In other words, it computes the [relative complement](https://en.wikipedia.org/wiki/Complement_\\(set_theory\\)#Relative_complement) of the second set.",
        &["", ""],
    ),
    (
        "setunion",
        "The `setunion` function takes multiple sets and produces a single set containing the elements from all of the given sets. In other words, it computes the [union](https://en.wikipedia.org/wiki/Union_\\(set_theory\\)) of the sets.",
        &["", ""],
    ),
    (
        "sha1",
        "`sha1` computes the SHA1 hash of a given string and encodes it with hexadecimal digits.",
        &[""],
    ),
    (
        "sha256",
        "`sha256` computes the SHA256 hash of a given string and encodes it with hexadecimal digits.",
        &[""],
    ),
    (
        "sha512",
        "`sha512` computes the SHA512 hash of a given string and encodes it with hexadecimal digits.",
        &[""],
    ),
    (
        "signum",
        "`signum` determines the sign of a number, returning a number between -1 and 1 to represent the sign.",
        &[""],
    ),
    (
        "slice",
        "`slice` extracts some consecutive elements from within a list.",
        &["", "", ""],
    ),
    (
        "sort",
        "`sort` takes a list of strings and returns a new list with those strings sorted lexicographically.",
        &[""],
    ),
    (
        "split",
        "`split` produces a list by dividing a given string at all occurrences of a given separator.",
        &["", ""],
    ),
    (
        "startswith",
        "`startswith` takes two values: a string to check and a prefix string. The function returns true if the string begins with that exact prefix.",
        &["", ""],
    ),
    (
        "strcontains",
        "`strcontains` takes two values: a string to check and an expected substring. The function returns true if the string has the substring contained within it.",
        &["", ""],
    ),
    (
        "strrev",
        "`strrev` reverses the characters in a string. Note that the characters are treated as _Unicode characters_ (in technical terms, Unicode [grapheme cluster boundaries](https://unicode.org/reports/tr29/#Grapheme_Cluster_Boundaries) are respected).",
        &[""],
    ),
    (
        "substr",
        "`substr` extracts a substring from a given string by offset and (maximum) length.",
        &["", "", ""],
    ),
    (
        "sum",
        "`sum` takes a list or set of numbers and returns the sum of those numbers.",
        &[""],
    ),
    (
        "templatefile",
        "`templatefile` reads the file at the given path and renders its content as a template using a supplied set of template variables.",
        &["", ""],
    ),
    (
        "templatestring",
        "`templatestring` renders a string from elsewhere in the module as a template, with the given object's attributes as its variables.",
        &["The string to render as a template: a reference to a string value.", "An object whose attributes are the template's variables."],
    ),
    (
        "textdecodebase64",
        "`textdecodebase64` function decodes a string that was previously Base64-encoded, and then interprets the result as characters in a specified character encoding.",
        &["", ""],
    ),
    (
        "textencodebase64",
        "`textencodebase64` encodes the unicode characters in a given string using a specified character encoding, returning the result base64 encoded because Terraform language strings are always sequences of unicode characters.",
        &["", ""],
    ),
    (
        "timeadd",
        "`timeadd` adds a duration to a timestamp, returning a new timestamp.",
        &["", ""],
    ),
    (
        "timecmp",
        "`timecmp` compares two timestamps and returns a number that represents the ordering of the instants those timestamps represent.",
        &["", ""],
    ),
    (
        "timestamp",
        "`timestamp` returns a UTC timestamp string in [RFC 3339](https://tools.ietf.org/html/rfc3339) format.",
        &[],
    ),
    (
        "title",
        "`title` converts the first letter of each word in the given string to uppercase.",
        &[""],
    ),
    (
        "tobool",
        "`tobool` converts its argument to a boolean value.",
        &[""],
    ),
    (
        "tolist",
        "`tolist` converts its argument to a list value.",
        &[""],
    ),
    (
        "tomap",
        "`tomap` converts its argument to a map value.",
        &[""],
    ),
    (
        "tonumber",
        "`tonumber` converts its argument to a number value.",
        &[""],
    ),
    (
        "toset",
        "`toset` converts its argument to a set value.",
        &[""],
    ),
    (
        "tostring",
        "`tostring` converts its argument to a string value.",
        &[""],
    ),
    (
        "transpose",
        "`transpose` takes a map of lists of strings and swaps the keys and values to produce a new map of lists of strings.",
        &[""],
    ),
    (
        "trim",
        "`trim` removes the specified set of characters from the start and end of the given string.",
        &["", "A string containing all of the characters to trim. Each character is taken separately, so the order of characters is insignificant."],
    ),
    (
        "trimprefix",
        "`trimprefix` removes the specified prefix from the start of the given string. If the string does not start with the prefix, the string is returned unchanged.",
        &["", ""],
    ),
    (
        "trimspace",
        "`trimspace` removes any space characters from the start and end of the given string.",
        &[""],
    ),
    (
        "trimsuffix",
        "`trimsuffix` removes the specified suffix from the end of the given string.",
        &["", ""],
    ),
    (
        "try",
        "`try` evaluates all of its argument expressions in turn and returns the result of the first one that does not produce any errors.",
        &[""],
    ),
    (
        "type",
        "`type` returns the type of a given value.",
        &[""],
    ),
    (
        "upper",
        "`upper` converts all cased letters in the given string to uppercase.",
        &[""],
    ),
    (
        "urlencode",
        "`urlencode` applies URL encoding to a given string.",
        &[""],
    ),
    (
        "uuid",
        "`uuid` generates a unique identifier string.",
        &[],
    ),
    (
        "uuidv5",
        "`uuidv5` generates a _name-based_ UUID, as described in [RFC 4122 section 4.3](https://tools.ietf.org/html/rfc4122#section-4.3), also known as a \"version 5\" UUID.",
        &["", ""],
    ),
    (
        "values",
        "`values` takes a map and returns a list containing the values of the elements in that map.",
        &[""],
    ),
    (
        "yamldecode",
        "`yamldecode` parses a string as a subset of YAML, and produces a representation of its value.",
        &[""],
    ),
    (
        "yamlencode",
        "`yamlencode` encodes a given value to a string using [YAML 1.2](https://yaml.org/spec/1.2/spec.html) block syntax.",
        &[""],
    ),
    (
        "zipmap",
        "`zipmap` constructs a map from a list of keys and a corresponding list of values.",
        &["", ""],
    ),
];
