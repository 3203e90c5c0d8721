//! The OCI image layout writer and checker: a round trip on synthetic binaries (config, labels, owners, digests,
//! determinism, tampering), and the shipped image built by hack/build-image.sh (both platforms, `--version` runs).
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use xtask::image::{self, ImageInput, PlatformBinary};

/// A minimal 64-bit little-endian ELF header with one program header of type `segment` (3 = PT_INTERP).
fn fake_elf(machine: u16, segment: u32) -> Vec<u8> {
    let mut elf = vec![0u8; 64 + 56];
    elf[..4].copy_from_slice(b"\x7fELF");
    elf[4] = 2; // 64-bit
    elf[5] = 1; // little endian
    elf[18..20].copy_from_slice(&machine.to_le_bytes());
    elf[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
    elf[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
    elf[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
    elf[64..68].copy_from_slice(&segment.to_le_bytes());
    elf
}

fn write_synthetic(dir: &Path) -> PathBuf {
    let amd64 = dir.join("amd64");
    let arm64 = dir.join("arm64");
    let ca = dir.join("ca.crt");
    std::fs::write(&amd64, fake_elf(62, 1)).unwrap();
    std::fs::write(&arm64, fake_elf(183, 1)).unwrap();
    std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\n").unwrap();
    let out = dir.join("layout");
    image::write_layout(
        &out,
        &ImageInput {
            version: "1.2.3".into(),
            revision: "0123456789abcdef0123456789abcdef01234567".into(),
            ca_bundle: ca,
            platforms: vec![
                PlatformBinary {
                    architecture: "amd64".into(),
                    binary: amd64,
                },
                PlatformBinary {
                    architecture: "arm64".into(),
                    binary: arm64,
                },
            ],
        },
    )
    .unwrap();
    out
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn written_layout_reads_back_with_user_entrypoint_labels_and_owned_binary() {
    let dir = scratch("image-round-trip");
    let layout = write_synthetic(&dir);
    let (tag, images) = image::read_layout(&layout).unwrap();
    assert_eq!(tag, "1.2.3");
    let architectures: Vec<&str> = images.iter().map(|i| i.architecture.as_str()).collect();
    assert_eq!(architectures, ["amd64", "arm64"]);
    for image in &images {
        assert_eq!(image.config["User"], "65532:65532");
        assert_eq!(image.config["Entrypoint"], serde_json::json!(["/coder-k8s"]));
        let labels = &image.config["Labels"];
        assert_eq!(labels["org.opencontainers.image.version"], "1.2.3");
        assert_eq!(
            labels["org.opencontainers.image.revision"],
            "0123456789abcdef0123456789abcdef01234567"
        );
        assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
        assert_eq!(labels["org.opencontainers.image.title"], "coder-k8s");
        assert_eq!(
            labels["org.opencontainers.image.source"],
            "https://github.com/coder/coder-k8s"
        );
        let binary = &image.files["/coder-k8s"];
        assert_eq!((binary.mode, binary.uid, binary.gid), (0o755, 65532, 65532));
        let machine = if image.architecture == "amd64" { 62 } else { 183 };
        assert_eq!(binary.content, fake_elf(machine, 1));
        assert_eq!(image.files["/etc/ssl/certs/ca-certificates.crt"].uid, 0);
        assert!(String::from_utf8_lossy(&image.files["/etc/passwd"].content).contains(":65532:65532:"));
    }
    assert!(Path::new(&layout).join("oci-layout").is_file());
}

#[test]
fn same_inputs_give_the_same_digests() {
    let first = std::fs::read(write_synthetic(&scratch("image-determinism-1")).join("index.json")).unwrap();
    let second = std::fs::read(write_synthetic(&scratch("image-determinism-2")).join("index.json")).unwrap();
    assert_eq!(first, second);
}

#[test]
fn a_tampered_blob_is_refused() {
    let layout = write_synthetic(&scratch("image-tamper"));
    let blobs = layout.join("blobs/sha256");
    // The largest blob is a layer: corrupt one byte.
    let largest = std::fs::read_dir(&blobs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut data = std::fs::read(&largest).unwrap();
    let last = data.len() - 1;
    data[last] ^= 0xff;
    std::fs::write(&largest, data).unwrap();
    let error = image::read_layout(&layout)
        .err()
        .expect("tampered layout must fail");
    assert!(
        format!("{error:#}").contains("does not match its digest"),
        "{error:#}"
    );
}

#[test]
fn elf_facts_name_the_architecture_and_see_a_dynamic_loader() {
    let facts = image::elf_facts(&fake_elf(183, 1)).unwrap();
    assert_eq!(
        (facts.architecture.as_str(), facts.statically_linked),
        ("arm64", true)
    );
    let dynamic = image::elf_facts(&fake_elf(62, 3)).unwrap();
    assert_eq!(
        (dynamic.architecture.as_str(), dynamic.statically_linked),
        ("amd64", false)
    );
    assert!(image::elf_facts(b"#!/bin/sh\necho hi\n").is_err());
    let mut truncated = fake_elf(62, 1);
    truncated.truncate(70);
    assert!(image::elf_facts(&truncated).is_err());
}

#[test]
fn synthetic_binaries_fail_the_full_check() {
    // check_layout runs the binary: a header-only ELF cannot run, so the check must fail rather than pass on config.
    let layout = write_synthetic(&scratch("image-check-synthetic"));
    let error = format!("{:#}", image::check_layout(&layout).expect_err("must fail"));
    assert!(
        error.contains("extracted binary") || error.contains("--version"),
        "{error}"
    );
}

/// The layout of the shipped image: `CODER_K8S_IMAGE_LAYOUT` (hack/test.sh builds it before the tests), otherwise
/// built here by hack/build-image.sh into a target directory of its own (cargo holds this test's one).
fn shipped_layout() -> PathBuf {
    if let Some(dir) = std::env::var_os("CODER_K8S_IMAGE_LAYOUT") {
        return PathBuf::from(dir);
    }
    let root = xtask::repo_root();
    let out = Command::new("bash")
        .arg(root.join("hack/build-image.sh"))
        .env(
            "CODER_K8S_IMAGE_TARGET_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("image-build"),
        )
        .env(
            "CODER_K8S_IMAGE_PROFILE",
            std::env::var("CODER_K8S_IMAGE_PROFILE").unwrap_or_else(|_| "image-ci".into()),
        )
        .output()
        .expect("run hack/build-image.sh");
    assert!(
        out.status.success(),
        "hack/build-image.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

#[test]
fn shipped_image_has_both_platforms_its_config_and_a_binary_that_prints_its_version() {
    let layout = shipped_layout();
    let report = image::check_layout(&layout).unwrap();
    assert!(
        report
            .iter()
            .any(|line| line.starts_with("amd64: user 65532:65532")),
        "{report:?}"
    );
    assert!(
        report
            .iter()
            .any(|line| line.starts_with("arm64: user 65532:65532")),
        "{report:?}"
    );
    assert!(
        report.iter().any(|line| line.contains("--version prints")),
        "{report:?}"
    );
    let (tag, images) = image::read_layout(&layout).unwrap();
    assert_eq!(tag, env!("CARGO_PKG_VERSION"));
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(xtask::repo_root())
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    for image in images {
        assert_eq!(
            image.config["Labels"]["org.opencontainers.image.revision"],
            head.as_str()
        );
    }
}
