//! "Did you mean" suggestions: the closest candidate by edit distance, as Terraform offers
//! them (only when the distance is small enough to be a likely typo).

/// The candidate closest to `given`, if one is within a distance of 2 (or 3 for long names).
pub(crate) fn did_you_mean<'a>(
    given: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let limit = if given.chars().count() > 8 { 3 } else { 2 };
    candidates
        .into_iter()
        .filter(|c| *c != given)
        .map(|c| (distance(given, c), c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c.to_string())
}

/// " Did you mean \"x\"?" or "", for appending to a detail sentence.
pub(crate) fn suffix<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    match did_you_mean(given, candidates) {
        Some(c) => format!(" Did you mean {}?", crate::addr::quote(&c)),
        None => String::new(),
    }
}

/// Levenshtein distance over characters.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
