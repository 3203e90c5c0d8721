//! The coder-k8s container image as an OCI image layout, written without a container daemon, and read back for checks.
//!
//! Layout: `oci-layout`, `index.json` (one descriptor, tagged with the version, of a multi-platform image index) and
//! `blobs/sha256/…`. Each platform's image has one gzip'd tar layer: the static binary at `/coder-k8s` owned by
//! 65532:65532, a CA bundle (HTTPS to Coder) and `/etc/passwd`/`/etc/group` naming the user. Every timestamp is 0, so
//! the same binaries always give the same digests.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The image's user and group: numeric, so the kubelet can check `runAsNonRoot` without reading `/etc/passwd`.
pub const USER: &str = "65532:65532";
/// Where the binary lives in the image; also the entrypoint.
pub const BINARY_PATH: &str = "/coder-k8s";
/// Where the CA bundle lives in the image (Debian's path, which TLS libraries probe first).
pub const CA_BUNDLE_PATH: &str = "/etc/ssl/certs/ca-certificates.crt";

const MEDIA_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const MEDIA_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const MEDIA_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const MEDIA_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const UID: u64 = 65532;

/// One platform's binary.
pub struct PlatformBinary {
    /// OCI architecture name: `amd64` or `arm64`.
    pub architecture: String,
    pub binary: PathBuf,
}

/// What the image is built from.
pub struct ImageInput {
    pub version: String,
    pub revision: String,
    pub ca_bundle: PathBuf,
    pub platforms: Vec<PlatformBinary>,
}

/// The OCI labels (also the manifests' annotations).
pub fn labels(version: &str, revision: &str) -> BTreeMap<String, String> {
    [
        ("org.opencontainers.image.title", "coder-k8s"),
        (
            "org.opencontainers.image.description",
            "Kubernetes operator for Coder",
        ),
        (
            "org.opencontainers.image.source",
            "https://github.com/coder/coder-k8s",
        ),
        ("org.opencontainers.image.licenses", "Apache-2.0"),
        ("org.opencontainers.image.version", version),
        ("org.opencontainers.image.revision", revision),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Writes the image layout into `out` (created; an existing layout there is replaced).
pub fn write_layout(out: &Path, input: &ImageInput) -> Result<()> {
    ensure!(!input.platforms.is_empty(), "no platform binaries given");
    if out.exists() {
        fs::remove_dir_all(out).with_context(|| format!("remove {}", out.display()))?;
    }
    fs::create_dir_all(out.join("blobs/sha256")).with_context(|| format!("create {}", out.display()))?;
    let ca_bundle = fs::read(&input.ca_bundle)
        .with_context(|| format!("read the CA bundle {}", input.ca_bundle.display()))?;
    let labels = labels(&input.version, &input.revision);
    let mut manifests = Vec::new();
    for platform in &input.platforms {
        let binary =
            fs::read(&platform.binary).with_context(|| format!("read {}", platform.binary.display()))?;
        manifests.push(write_platform_image(
            out,
            &platform.architecture,
            &binary,
            &ca_bundle,
            &labels,
        )?);
    }
    let index = json!({
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": manifests,
        "annotations": labels,
    });
    let mut index_descriptor = write_blob(out, MEDIA_INDEX, &to_bytes(&index)?)?;
    index_descriptor["annotations"] = json!({ "org.opencontainers.image.ref.name": input.version });
    let top = json!({ "schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": [index_descriptor] });
    fs::write(out.join("index.json"), to_bytes(&top)?).context("write index.json")?;
    fs::write(out.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).context("write oci-layout")
}

/// Writes one platform's layer, config and manifest; returns the manifest's descriptor with its platform.
fn write_platform_image(
    out: &Path,
    architecture: &str,
    binary: &[u8],
    ca_bundle: &[u8],
    labels: &BTreeMap<String, String>,
) -> Result<Value> {
    let tar = layer_tar(binary, ca_bundle)?;
    let diff_id = format!("sha256:{}", sha256_hex(&tar));
    let layer = write_blob(out, MEDIA_LAYER, &gzip(&tar)?)?;
    let mut platform = json!({ "architecture": architecture, "os": "linux" });
    if architecture == "arm64" {
        platform["variant"] = json!("v8");
    }
    let mut config = json!({
        "created": "1970-01-01T00:00:00Z",
        "architecture": architecture,
        "os": "linux",
        "config": {
            "User": USER,
            "Entrypoint": [BINARY_PATH],
            "Env": ["PATH=/", format!("SSL_CERT_FILE={CA_BUNDLE_PATH}")],
            "WorkingDir": "/",
            "Labels": labels,
        },
        "rootfs": { "type": "layers", "diff_ids": [diff_id] },
        "history": [{ "created": "1970-01-01T00:00:00Z", "created_by": "cargo xtask image-write" }],
    });
    if let Some(variant) = platform.get("variant") {
        config["variant"] = variant.clone();
    }
    let config = write_blob(out, MEDIA_CONFIG, &to_bytes(&config)?)?;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": config,
        "layers": [layer],
        "annotations": labels,
    });
    let mut descriptor = write_blob(out, MEDIA_MANIFEST, &to_bytes(&manifest)?)?;
    descriptor["platform"] = platform;
    Ok(descriptor)
}

/// The layer's files: directories and `/etc` files owned by root, the binary by the image user.
fn layer_tar(binary: &[u8], ca_bundle: &[u8]) -> Result<Vec<u8>> {
    let passwd =
        b"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";
    let group = b"root:x:0:\nnonroot:x:65532:\n";
    let mut builder = tar::Builder::new(Vec::new());
    for dir in ["etc/", "etc/ssl/", "etc/ssl/certs/"] {
        append(&mut builder, dir, tar::EntryType::Directory, 0o755, 0, &[])?;
    }
    let files: [(&str, &[u8], u32, u64); 4] = [
        ("etc/passwd", passwd, 0o644, 0),
        ("etc/group", group, 0o644, 0),
        (CA_BUNDLE_PATH.trim_start_matches('/'), ca_bundle, 0o644, 0),
        (BINARY_PATH.trim_start_matches('/'), binary, 0o755, UID),
    ];
    for (path, data, mode, owner) in files {
        append(&mut builder, path, tar::EntryType::Regular, mode, owner, data)?;
    }
    builder.into_inner().context("finish the layer tar")
}

fn append(
    builder: &mut tar::Builder<Vec<u8>>,
    path: &str,
    kind: tar::EntryType,
    mode: u32,
    owner: u64,
    data: &[u8],
) -> Result<()> {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(kind);
    header
        .set_path(path)
        .with_context(|| format!("tar path {path}"))?;
    header.set_mode(mode);
    header.set_uid(owner);
    header.set_gid(owner);
    header.set_mtime(0);
    header.set_size(data.len() as u64);
    header.set_cksum();
    builder
        .append(&header, data)
        .with_context(|| format!("append {path}"))
}

fn gzip(data: &[u8]) -> Result<Vec<u8>> {
    // GzBuilder writes mtime 0 and no file name, so the bytes depend on the content only.
    let mut encoder = flate2::GzBuilder::new().write(Vec::new(), flate2::Compression::best());
    encoder.write_all(data).context("gzip the layer")?;
    encoder.finish().context("gzip the layer")
}

/// Stores `data` under its digest; returns its descriptor.
fn write_blob(out: &Path, media_type: &str, data: &[u8]) -> Result<Value> {
    let hex = sha256_hex(data);
    let path = out.join("blobs/sha256").join(&hex);
    fs::write(&path, data).with_context(|| format!("write {}", path.display()))?;
    Ok(json!({ "mediaType": media_type, "digest": format!("sha256:{hex}"), "size": data.len() }))
}

fn to_bytes(value: &Value) -> Result<Vec<u8>> {
    serde_json::to_vec(value).context("serialise JSON")
}

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// One platform's image as read back from a layout.
pub struct PlatformImage {
    pub architecture: String,
    /// The image config's `config` object (User, Entrypoint, Labels, …).
    pub config: Value,
    /// Every file of the layer: path → (mode, uid, gid, content).
    pub files: BTreeMap<String, LayerFile>,
}

/// One file of a layer.
pub struct LayerFile {
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub content: Vec<u8>,
}

/// Reads a layout back, verifying every blob's digest and size and each config's `diff_ids` against its layer.
/// Returns the tag (`org.opencontainers.image.ref.name`) and the platform images.
pub fn read_layout(dir: &Path) -> Result<(String, Vec<PlatformImage>)> {
    let layout: Value = serde_json::from_slice(&fs::read(dir.join("oci-layout")).context("read oci-layout")?)
        .context("parse oci-layout")?;
    ensure!(
        layout["imageLayoutVersion"] == "1.0.0",
        "oci-layout: unexpected {layout}"
    );
    let top: Value = serde_json::from_slice(&fs::read(dir.join("index.json")).context("read index.json")?)
        .context("parse index.json")?;
    let [descriptor] = top["manifests"].as_array().map(Vec::as_slice).unwrap_or_default() else {
        bail!("index.json must list exactly one image index");
    };
    let tag = descriptor["annotations"]["org.opencontainers.image.ref.name"]
        .as_str()
        .context("index.json: the image index has no ref.name annotation")?
        .to_owned();
    let index: Value = serde_json::from_slice(&read_blob(dir, descriptor, MEDIA_INDEX)?)?;
    let mut images = Vec::new();
    for manifest_descriptor in index["manifests"].as_array().into_iter().flatten() {
        images.push(read_platform_image(dir, manifest_descriptor)?);
    }
    ensure!(!images.is_empty(), "the image index lists no manifests");
    Ok((tag, images))
}

fn read_platform_image(dir: &Path, descriptor: &Value) -> Result<PlatformImage> {
    let architecture = descriptor["platform"]["architecture"]
        .as_str()
        .context("manifest descriptor without platform.architecture")?
        .to_owned();
    let manifest: Value = serde_json::from_slice(&read_blob(dir, descriptor, MEDIA_MANIFEST)?)?;
    let config: Value = serde_json::from_slice(&read_blob(dir, &manifest["config"], MEDIA_CONFIG)?)?;
    ensure!(
        config["architecture"] == architecture && config["os"] == "linux",
        "{architecture}: the config says {}/{}",
        config["os"],
        config["architecture"]
    );
    let [layer] = manifest["layers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    else {
        bail!("{architecture}: the manifest must have exactly one layer");
    };
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(read_blob(dir, layer, MEDIA_LAYER)?.as_slice())
        .read_to_end(&mut tar)
        .with_context(|| format!("{architecture}: gunzip the layer"))?;
    let diff_id = format!("sha256:{}", sha256_hex(&tar));
    ensure!(
        config["rootfs"]["diff_ids"] == json!([diff_id]),
        "{architecture}: rootfs.diff_ids does not match the layer"
    );
    Ok(PlatformImage {
        architecture,
        config: config["config"].clone(),
        files: layer_files(&tar)?,
    })
}

fn layer_files(tar: &[u8]) -> Result<BTreeMap<String, LayerFile>> {
    let mut files = BTreeMap::new();
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries().context("read the layer tar")? {
        let mut entry = entry.context("read a layer entry")?;
        let header = entry.header();
        let (mode, uid, gid) = (header.mode()?, header.uid()?, header.gid()?);
        let path = format!("/{}", entry.path()?.display());
        let mut content = Vec::new();
        entry.read_to_end(&mut content)?;
        files.insert(
            path,
            LayerFile {
                mode,
                uid,
                gid,
                content,
            },
        );
    }
    Ok(files)
}

/// Reads a blob named by a descriptor and checks its media type, size and digest.
fn read_blob(dir: &Path, descriptor: &Value, media_type: &str) -> Result<Vec<u8>> {
    ensure!(
        descriptor["mediaType"] == media_type,
        "descriptor {descriptor}: expected media type {media_type}"
    );
    let digest = descriptor["digest"]
        .as_str()
        .context("descriptor without digest")?;
    let hex = digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .with_context(|| format!("unsupported digest {digest}"))?;
    let data = fs::read(dir.join("blobs/sha256").join(hex)).with_context(|| format!("read blob {digest}"))?;
    ensure!(
        sha256_hex(&data) == hex,
        "blob {digest}: content does not match its digest"
    );
    ensure!(
        descriptor["size"].as_u64() == Some(data.len() as u64),
        "blob {digest}: size {} does not match the descriptor",
        data.len()
    );
    Ok(data)
}

/// What an ELF header says about a binary.
#[derive(Debug, PartialEq, Eq)]
pub struct ElfFacts {
    /// OCI architecture name of `e_machine` (`amd64`, `arm64`) or `machine-N`.
    pub architecture: String,
    /// No `PT_INTERP` program header: the kernel runs it without a dynamic loader.
    pub statically_linked: bool,
}

/// Reads the facts that matter for an image from a 64-bit little-endian ELF executable.
pub fn elf_facts(binary: &[u8]) -> Result<ElfFacts> {
    ensure!(
        binary.len() >= 64 && binary.starts_with(b"\x7fELF"),
        "not an ELF file"
    );
    ensure!(
        binary[4] == 2 && binary[5] == 1,
        "not a 64-bit little-endian ELF file"
    );
    let u16_at = |at: usize| u16::from_le_bytes([binary[at], binary[at + 1]]);
    let machine = u16_at(18);
    let architecture = match machine {
        62 => "amd64".to_owned(),
        183 => "arm64".to_owned(),
        other => format!("machine-{other}"),
    };
    let mut phoff_bytes = [0u8; 8];
    phoff_bytes.copy_from_slice(&binary[32..40]);
    let phoff = usize::try_from(u64::from_le_bytes(phoff_bytes)).context("program header offset")?;
    let (entry_size, count) = (usize::from(u16_at(54)), usize::from(u16_at(56)));
    ensure!(entry_size >= 4, "program header entries of {entry_size} bytes");
    let mut statically_linked = true;
    for index in 0..count {
        let at = phoff + index * entry_size;
        let entry = binary
            .get(at..at + entry_size)
            .context("program header table past the end of the file")?;
        if entry[..4] == 3u32.to_le_bytes() {
            statically_linked = false;
        }
    }
    Ok(ElfFacts {
        architecture,
        statically_linked,
    })
}

/// The OCI architecture of the machine running this check.
fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Checks a written layout end to end: linux/amd64 and linux/arm64 images with the numeric user, the entrypoint,
/// the labels (version = tag), a static binary of the right architecture owned by the image user, the CA bundle;
/// runs the binary of this machine's architecture with `--version` and expects the labelled version and revision.
/// Returns one line per check made.
pub fn check_layout(dir: &Path) -> Result<Vec<String>> {
    let (tag, images) = read_layout(dir)?;
    let mut report = vec![format!("layout {} tagged {tag}", dir.display())];
    let architectures: Vec<&str> = images.iter().map(|i| i.architecture.as_str()).collect();
    ensure!(
        architectures == ["amd64", "arm64"],
        "platforms {architectures:?}, expected amd64 and arm64"
    );
    let mut ran = false;
    for image in &images {
        report.extend(check_platform_image(image, &tag)?);
        if image.architecture == host_architecture() {
            report.push(run_version(image)?);
            ran = true;
        }
    }
    ensure!(
        ran,
        "no image for this machine's architecture {}",
        host_architecture()
    );
    Ok(report)
}

fn check_platform_image(image: &PlatformImage, tag: &str) -> Result<Vec<String>> {
    let arch = &image.architecture;
    let config = &image.config;
    ensure!(config["User"] == USER, "{arch}: User is {}", config["User"]);
    ensure!(
        config["Entrypoint"] == json!([BINARY_PATH]),
        "{arch}: Entrypoint is {}",
        config["Entrypoint"]
    );
    let revision = config["Labels"]["org.opencontainers.image.revision"]
        .as_str()
        .filter(|r| !r.is_empty())
        .with_context(|| format!("{arch}: no revision label"))?;
    let expected = labels(tag, revision);
    ensure!(
        config["Labels"] == json!(expected),
        "{arch}: labels {} differ from {}",
        config["Labels"],
        json!(expected)
    );
    let binary = image
        .files
        .get(BINARY_PATH)
        .with_context(|| format!("{arch}: no {BINARY_PATH} in the layer"))?;
    ensure!(
        (binary.mode, binary.uid, binary.gid) == (0o755, UID, UID),
        "{arch}: {BINARY_PATH} has mode {:o} owner {}:{}",
        binary.mode,
        binary.uid,
        binary.gid
    );
    let elf = elf_facts(&binary.content).with_context(|| format!("{arch}: {BINARY_PATH}"))?;
    ensure!(
        elf == ElfFacts {
            architecture: arch.clone(),
            statically_linked: true
        },
        "{arch}: {BINARY_PATH} is {elf:?}"
    );
    ensure!(
        image
            .files
            .get(CA_BUNDLE_PATH)
            .is_some_and(|f| !f.content.is_empty()),
        "{arch}: no CA bundle at {CA_BUNDLE_PATH}"
    );
    Ok(vec![format!(
        "{arch}: user {USER}, entrypoint {BINARY_PATH}, labels, static {arch} ELF binary owned by {UID}, CA bundle"
    )])
}

/// Extracts the binary to a temporary file and runs `--version`; expects `coder-k8s <version> (commit <revision>)`.
fn run_version(image: &PlatformImage) -> Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let labels = &image.config["Labels"];
    let expected = format!(
        "coder-k8s {} (commit {})",
        labels["org.opencontainers.image.version"]
            .as_str()
            .unwrap_or_default(),
        labels["org.opencontainers.image.revision"]
            .as_str()
            .unwrap_or_default()
    );
    // One directory per call: checks may run concurrently in one process (tests).
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let scratch = std::env::temp_dir().join(format!("coder-k8s-image-check-{}-{call}", std::process::id()));
    fs::create_dir_all(&scratch).with_context(|| format!("create {}", scratch.display()))?;
    let binary = scratch.join("coder-k8s");
    let result = (|| {
        let content = &image.files.get(BINARY_PATH).context("no binary")?.content;
        fs::write(&binary, content).context("extract the binary")?;
        fs::set_permissions(&binary, fs::Permissions::from_mode(0o755)).context("chmod the binary")?;
        std::process::Command::new(&binary)
            .arg("--version")
            .output()
            .context("run the extracted binary")
    })();
    let _ = fs::remove_dir_all(&scratch);
    let output = result?;
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    ensure!(
        output.status.success() && stdout == expected,
        "{}: `coder-k8s --version` printed {stdout:?} (status {}), expected {expected:?}",
        image.architecture,
        output.status
    );
    Ok(format!("{}: --version prints {stdout:?}", image.architecture))
}
