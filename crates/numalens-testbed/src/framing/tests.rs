use super::*;

fn encode(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

fn frame_file(token: &str, name: &str, data: &[u8]) -> Vec<String> {
    let b64 = encode(data);
    let mut lines = vec![format!(
        "@@NLTB:{token}:FILE {name} {} {}",
        data.len(),
        hex(&Sha256::digest(data))
    )];
    for chunk in b64.as_bytes().chunks(76) {
        lines.push(format!(
            "@@NLTB:{token}:D {}\r",
            std::str::from_utf8(chunk).unwrap()
        ));
    }
    lines.push(format!("@@NLTB:{token}:END {name}"));
    lines
}

#[test]
fn base64_round_trips_all_lengths() {
    for len in 0..70 {
        let data: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
        assert_eq!(base64_decode(&encode(&data)).unwrap(), data, "len {len}");
    }
    assert!(base64_decode("abc").is_none());
    assert!(base64_decode("a*cd").is_none());
}

#[test]
fn files_and_exit_survive_kernel_noise() {
    let data: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    let mut lines = vec![
        "[    0.000000] Linux version 6.1.0".to_string(),
        "@@NLTB:tok:READY".to_string(),
    ];
    for (i, l) in frame_file("tok", "out.bin", &data).into_iter().enumerate() {
        if i % 3 == 1 {
            lines.push(format!("[    4.{i:06}] random: crng init done"));
        }
        // A kernel message without a newline, followed by the frame on the same line.
        if i == 5 {
            lines.push(format!("[    5.1] sched: RT throttling activated{l}"));
        } else {
            lines.push(l);
        }
    }
    lines.push("@@NLTB:other:EXIT 9".into()); // A stale run's token: ignored.
    lines.push("@@NLTB:tok:EXIT 3".into());
    let frames = parse(&lines.join("\n"), "tok").unwrap();
    assert!(frames.ready);
    assert_eq!(frames.files["out.bin"], data);
    assert_eq!(frames.exit_status, Some(3));
}

#[test]
fn corruption_is_reported_not_returned() {
    let mut lines = frame_file("t", "f", b"hello world, hello numa");
    lines[1] = lines[1].replace('h', "x").replace('Z', "Y");
    let err = parse(&lines.join("\n"), "t").unwrap_err().to_string();
    assert!(err.contains("file f"), "{err}");
}

#[test]
fn cut_off_file_and_missing_exit() {
    let lines = frame_file("t", "f", b"abcdef");
    let err = parse(&lines[..2].join("\n"), "t").unwrap_err().to_string();
    assert!(err.contains("cut off"), "{err}");
    let frames = parse("@@NLTB:t:READY\nKernel panic", "t").unwrap();
    assert_eq!(frames.exit_status, None);
}

#[test]
fn files_in_subdirectories_keep_their_relative_path() {
    let lines = frame_file("t", "run.numalens/meta.json", b"{}");
    let frames = parse(&lines.join("\n"), "t").unwrap();
    assert_eq!(frames.files["run.numalens/meta.json"], b"{}");
}

#[test]
fn names_that_would_leave_the_output_directory_are_refused() {
    for bad in ["/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/"] {
        let lines = frame_file("t", bad, b"x");
        let err = parse(&lines.join("\n"), "t").unwrap_err().to_string();
        assert!(err.contains("not a relative path"), "{bad}: {err}");
    }
}
