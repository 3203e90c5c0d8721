//! Source archives for Coder template versions in tests: a one-file ustar archive, the smallest upload Coder and the
//! Coder API test server accept.

/// A ustar archive holding one regular file `name` (at most 100 bytes) with `content`.
pub fn one_file_tar(name: &str, content: &[u8]) -> Vec<u8> {
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
    // Two zero blocks end the archive.
    out.resize(out.len() + 1024, 0);
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
}
