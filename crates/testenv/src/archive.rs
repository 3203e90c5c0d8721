//! Source archives for Coder template versions in tests: a one-file ustar archive, the smallest upload Coder and the
//! Coder API test server accept; ustar archives of several files, read and written; and an echo-provisioner archive
//! whose parse declares Terraform variables (for template variables on real Coder and on the test server alike).

/// A ustar archive holding one regular file `name` (at most 100 bytes) with `content`.
pub fn one_file_tar(name: &str, content: &[u8]) -> Vec<u8> {
    let mut out = tar_entry(name, content);
    // Two zero blocks end the archive.
    out.resize(out.len() + 1024, 0);
    out
}

/// A ustar archive of the regular files `entries` (names of at most 100 bytes), in order.
pub fn tar_of(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out: Vec<u8> = entries
        .iter()
        .flat_map(|(name, content)| tar_entry(name, content))
        .collect();
    out.resize(out.len() + 1024, 0);
    out
}

/// The regular files of a ustar archive, in order (directories and other entries left out).
pub fn tar_entries(tar: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(header) = tar.get(at..at + 512) {
        if header.iter().all(|b| *b == 0) {
            break;
        }
        let field = |range: std::ops::Range<usize>| {
            String::from_utf8_lossy(&header[range])
                .trim_matches(char::from(0))
                .trim()
                .to_owned()
        };
        let Ok(size) = usize::from_str_radix(&field(124..136), 8) else {
            break;
        };
        let start = at + 512;
        let Some(content) = tar.get(start..start + size) else {
            break;
        };
        if matches!(header[156], b'0' | 0) {
            out.push((field(0..100), content.to_vec()));
        }
        at = start + size.div_ceil(512) * 512;
    }
    out
}

/// A Terraform variable an echo archive declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EchoVariable {
    pub name: &'static str,
    /// `None`: required.
    pub default: Option<&'static str>,
    pub sensitive: bool,
}

/// `echo_tar` (an echo-provisioner archive) with its parse answers replaced by one that declares `variables` (what
/// real Coder's echo provisioner reads), and a `main.tf` declaring them in Terraform (what the Coder API test server
/// reads).
pub fn echo_with_variables(echo_tar: &[u8], variables: &[EchoVariable]) -> Vec<u8> {
    let mut entries: Vec<(String, Vec<u8>)> = tar_entries(echo_tar)
        .into_iter()
        .filter(|(name, _)| !name.ends_with(".parse.protobuf") && name != "main.tf")
        .collect();
    entries.push(("0.parse.protobuf".to_owned(), parse_response(variables)));
    entries.push(("main.tf".to_owned(), terraform_variables(variables).into_bytes()));
    tar_of(&entries)
}

/// The Terraform `variable` blocks of `variables`.
pub fn terraform_variables(variables: &[EchoVariable]) -> String {
    variables
        .iter()
        .map(|v| {
            let default = v
                .default
                .map(|d| format!("  default   = {d:?}\n"))
                .unwrap_or_default();
            let sensitive = if v.sensitive { "  sensitive = true\n" } else { "" };
            format!(
                "variable {:?} {{\n  type      = string\n{default}{sensitive}}}\n\n",
                v.name
            )
        })
        .collect()
}

/// A protobuf length-delimited field.
fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![(number << 3) | 2];
    let mut length = bytes.len();
    loop {
        let byte = u8::try_from(length & 0x7f).unwrap_or(0);
        length >>= 7;
        if length == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(bytes);
    out
}

/// A protobuf boolean field set to true.
fn true_field(number: u8) -> Vec<u8> {
    vec![number << 3, 1]
}

/// `provisionersdk.proto.Response{parse: ParseComplete{template_variables: ...}}`, encoded.
fn parse_response(variables: &[EchoVariable]) -> Vec<u8> {
    let parse: Vec<u8> = variables
        .iter()
        .flat_map(|v| {
            // TemplateVariable: name 1, type 3, default_value 4, required 5, sensitive 6.
            let mut variable = field(1, v.name.as_bytes());
            variable.extend(field(3, b"string"));
            match v.default {
                Some(default) => variable.extend(field(4, default.as_bytes())),
                None => variable.extend(true_field(5)),
            }
            if v.sensitive {
                variable.extend(true_field(6));
            }
            // ParseComplete.template_variables is field 2.
            field(2, &variable)
        })
        .collect();
    // Response.parse is field 2.
    field(2, &parse)
}

/// One ustar entry (header and padded content) for a regular file `name` (at most 100 bytes).
fn tar_entry(name: &str, content: &[u8]) -> Vec<u8> {
    let mut header = [0u8; 512];
    let name_len = name.len().min(100);
    header[..name_len].copy_from_slice(&name.as_bytes()[..name_len]);
    header[100..108].copy_from_slice(b"0000644\0");
    header[108..116].copy_from_slice(b"0000000\0");
    header[116..124].copy_from_slice(b"0000000\0");
    header[124..136].copy_from_slice(format!("{:011o}\0", content.len()).as_bytes());
    header[136..148].copy_from_slice(b"00000000000\0");
    // The checksum is computed with its own field as spaces.
    header[148..156].copy_from_slice(b"        ");
    header[156] = b'0';
    header[257..263].copy_from_slice(b"ustar\0");
    header[263..265].copy_from_slice(b"00");
    let sum: u32 = header.iter().map(|b| u32::from(*b)).sum();
    header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    let mut out = header.to_vec();
    out.extend_from_slice(content);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_tar_has_a_valid_header_the_content_and_the_end_blocks() {
        let tar = one_file_tar("main.tf", b"terraform {}\n");
        assert_eq!(tar.len(), 512 + 512 + 1024);
        assert_eq!(&tar[..7], b"main.tf");
        assert_eq!(&tar[257..262], b"ustar");
        let stored: u32 = u32::from_str_radix(std::str::from_utf8(&tar[148..154]).unwrap(), 8).unwrap();
        let mut header = tar[..512].to_vec();
        header[148..156].copy_from_slice(b"        ");
        assert_eq!(stored, header.iter().map(|b| u32::from(*b)).sum::<u32>());
        assert_eq!(&tar[512..525], b"terraform {}\n");
        assert!(tar[525..].iter().all(|b| *b == 0));
    }

    #[test]
    fn archives_read_back_their_entries() {
        let entries = vec![
            ("a.txt".to_owned(), b"one".to_vec()),
            ("b/c.txt".to_owned(), vec![0u8; 600]),
        ];
        assert_eq!(tar_entries(&tar_of(&entries)), entries);
        assert_eq!(
            tar_entries(&one_file_tar("main.tf", b"x")),
            [("main.tf".to_owned(), b"x".to_vec())]
        );
    }

    #[test]
    fn an_echo_archive_declares_its_variables_for_both_servers() {
        let echo = tar_of(&[
            ("0.parse.protobuf".to_owned(), b"old".to_vec()),
            ("1.parse.protobuf".to_owned(), b"old".to_vec()),
            ("0.init.protobuf".to_owned(), b"init".to_vec()),
        ]);
        let variables = [
            EchoVariable {
                name: "region",
                default: Some("eu"),
                sensitive: false,
            },
            EchoVariable {
                name: "token",
                default: None,
                sensitive: true,
            },
        ];
        let entries = tar_entries(&echo_with_variables(&echo, &variables));
        let names: Vec<&str> = entries.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["0.init.protobuf", "0.parse.protobuf", "main.tf"]);
        // Response{parse{template_variables{name "region", type "string", default "eu"}, {name "token", ...}}}
        let region = [field(1, b"region"), field(3, b"string"), field(4, b"eu")].concat();
        let token = [
            field(1, b"token"),
            field(3, b"string"),
            true_field(5),
            true_field(6),
        ]
        .concat();
        let expected = field(2, &[field(2, &region), field(2, &token)].concat());
        assert_eq!(entries[1].1, expected);
        // Protobuf's wire format: tag = field << 3 | type (2: length-delimited, 0: varint), then the length.
        assert_eq!(field(1, b"ab"), [0x0a, 2, b'a', b'b']);
        assert_eq!(true_field(5), [0x28, 1]);
        assert_eq!(field(2, &[0u8; 200])[..3], [0x12, 0xc8, 0x01]);
        assert_eq!(
            String::from_utf8(entries[2].1.clone()).unwrap(),
            "variable \"region\" {\n  type      = string\n  default   = \"eu\"\n}\n\nvariable \"token\" {\n  type      = string\n  sensitive = true\n}\n\n"
        );
    }
}
