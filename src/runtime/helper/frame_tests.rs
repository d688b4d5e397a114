//! The frame codec's table: every message round-trips, and every way a frame can be wrong is
//! refused without reading past the frame.

use super::frame::*;

fn samples() -> Vec<Msg> {
    vec![
        Msg::Hello { version: VERSION },
        Msg::Spawn(Spawn {
            id: 7,
            tty: true,
            capture: false,
            rows: 30,
            cols: 120,
            workdir: "/workspace".into(),
            argv: vec!["sh".into(), "-c".into(), "echo é".into()],
            env: vec!["A=1".into(), "EMPTY=".into()],
            ..Default::default()
        }),
        Msg::Spawn(Spawn {
            id: 8,
            workdir: "/workspace".into(),
            argv: vec!["sh".into(), "-lc".into(), "true".into()],
            wrap: "warm-river-2".into(),
            split: true,
            ..Default::default()
        }),
        Msg::Spawn(Spawn {
            id: u32::MAX,
            capture: true,
            argv: vec!["true".into()],
            ..Default::default()
        }),
        Msg::Input {
            id: 1,
            data: vec![0, 1, 2, 255],
        },
        Msg::Resize {
            id: 2,
            rows: 50,
            cols: 200,
        },
        Msg::Signal { id: 3, signal: 15 },
        Msg::Started { id: 4, pid: 4321 },
        Msg::Output {
            id: 5,
            data: b"\x1b[31mred".to_vec(),
        },
        Msg::Exited { id: 6, status: 137 },
        Msg::Exited { id: 6, status: -1 },
        Msg::Failed {
            id: 8,
            message: "start nope: No such file".into(),
        },
        Msg::Look {
            id: 9,
            pgid: 42,
            process: "warm-river-2".into(),
        },
        Msg::Look {
            id: 10,
            pgid: 0,
            process: "a".into(),
        },
        Msg::Seen {
            id: 9,
            group: Some(0),
            marked: Some(3),
        },
        Msg::Seen {
            id: 10,
            group: None,
            marked: None,
        },
        Msg::Seen {
            id: 11,
            group: Some(u32::MAX),
            marked: None,
        },
    ]
}

#[test]
fn every_message_round_trips_and_reports_its_length() {
    for msg in samples() {
        let bytes = encode(&msg);
        assert_eq!(decode(&bytes).unwrap(), Some((msg.clone(), bytes.len())));
        // Every strict prefix is "not yet", never an error or a different message.
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut]).unwrap(), None, "{msg:?} cut at {cut}");
        }
        // Two frames back to back are read one at a time.
        let mut two = bytes.clone();
        two.extend(encode(&Msg::Exited { id: 9, status: 0 }));
        assert_eq!(decode(&two).unwrap().unwrap().1, bytes.len());
    }
}

fn frame_of(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

#[test]
fn malformed_frames_are_refused() {
    let oversize = ((MAX_FRAME + 1) as u32).to_be_bytes();
    assert_eq!(decode(&oversize), Err(FrameError::TooLarge(MAX_FRAME + 1)));
    assert_eq!(
        decode(&u32::MAX.to_be_bytes()),
        Err(FrameError::TooLarge(u32::MAX as usize))
    );
    assert_eq!(decode(&frame_of(&[1, 0, 0])), Err(FrameError::TooShort(3)));
    assert_eq!(
        decode(&frame_of(&[99, 0, 0, 0, 1])),
        Err(FrameError::UnknownKind(99))
    );
    // A hello without the magic.
    let mut body = vec![1, 0, 0, 0, 0];
    body.extend(3u32.to_be_bytes());
    body.extend(b"abc");
    body.extend(1u32.to_be_bytes());
    assert!(matches!(
        decode(&frame_of(&body)),
        Err(FrameError::Malformed(_))
    ));
    // A field longer than its frame.
    let mut body = vec![17, 0, 0, 0, 1];
    body.extend(1000u32.to_be_bytes());
    body.extend(b"short");
    assert!(matches!(
        decode(&frame_of(&body)),
        Err(FrameError::Malformed(_))
    ));
    // Bytes after the last field.
    let mut body = encode(&Msg::Exited { id: 1, status: 0 })[4..].to_vec();
    body.push(0);
    assert!(matches!(
        decode(&frame_of(&body)),
        Err(FrameError::Malformed(_))
    ));
    // Text that is not UTF-8.
    let mut body = vec![19, 0, 0, 0, 1];
    body.extend(2u32.to_be_bytes());
    body.extend([0xff, 0xfe]);
    assert!(matches!(
        decode(&frame_of(&body)),
        Err(FrameError::Malformed(_))
    ));
}

#[test]
fn spawn_lists_are_bounded_before_anything_is_reserved() {
    let spawn = |argv_count: u32, flags: u8| {
        let mut body = vec![2, 0, 0, 0, 1, flags, 0, 0, 0, 0];
        body.extend(0u32.to_be_bytes()); // workdir
        body.extend(argv_count.to_be_bytes());
        frame_of(&body)
    };
    // A count the frame cannot hold (no item bytes follow) is refused at once.
    assert!(matches!(
        decode(&spawn(u32::MAX, 0)),
        Err(FrameError::Malformed(_))
    ));
    assert!(matches!(
        decode(&spawn((MAX_ITEMS + 1) as u32, 0)),
        Err(FrameError::Malformed(_))
    ));
    // No argv, or unknown flags.
    let mut empty = spawn(0, 0)[4..].to_vec();
    empty.extend(0u32.to_be_bytes());
    assert!(matches!(
        decode(&frame_of(&empty)),
        Err(FrameError::Malformed(_))
    ));
    let mut flags = encode(&Msg::Spawn(Spawn {
        id: 1,
        argv: vec!["x".into()],
        ..Default::default()
    }));
    flags[9] = 0b1000;
    assert!(matches!(decode(&flags), Err(FrameError::Malformed(_))));
}

#[test]
fn a_wrapped_spawn_names_a_plain_process_and_nothing_else() {
    let wrapped = |wrap: &str, tty: bool, capture: bool, split: bool| {
        decode(&encode(&Msg::Spawn(Spawn {
            id: 1,
            argv: vec!["sh".into()],
            wrap: wrap.into(),
            tty,
            capture,
            split,
            ..Default::default()
        })))
    };
    assert!(wrapped("warm-river", false, false, true).is_ok());
    assert!(wrapped("", false, false, false).is_ok());
    for (wrap, tty, capture, split) in [
        // The id is pasted into file names: nothing that could leave the run directory.
        ("../etc/passwd", false, false, false),
        ("a/b", false, false, false),
        (".", false, false, false),
        ("a b", false, false, false),
        (&"a".repeat(65) as &str, false, false, false),
        // Split stderr only for a wrapped command; a wrapped one has no terminal or capture.
        ("", false, false, true),
        ("warm-river", true, false, false),
        ("warm-river", false, true, false),
    ] {
        assert!(
            matches!(
                wrapped(wrap, tty, capture, split),
                Err(FrameError::Malformed("wrap"))
            ),
            "{wrap:?} tty={tty} capture={capture} split={split}"
        );
    }
}

/// A look names one of moat's process ids (it is matched as `MOAT_PROCESS=<id>`), and an
/// answer says which counts it knows with defined bits only.
#[test]
fn a_look_names_a_plain_process_and_its_answer_only_known_counts() {
    let look = |process: &str| {
        decode(&encode(&Msg::Look {
            id: 1,
            pgid: 7,
            process: process.into(),
        }))
    };
    assert!(look("warm-river-2").is_ok());
    for bad in ["", "a b", "a=b", "../x", &"a".repeat(65) as &str] {
        assert_eq!(look(bad), Err(FrameError::Malformed("process")), "{bad:?}");
    }
    let mut seen = encode(&Msg::Seen {
        id: 1,
        group: Some(1),
        marked: Some(2),
    });
    seen[9] = 0b100;
    assert_eq!(decode(&seen), Err(FrameError::Malformed("known")));
    // A count it does not know still takes its four bytes; none may be missing.
    let short = &encode(&Msg::Seen {
        id: 1,
        group: None,
        marked: None,
    })[4..13];
    assert!(matches!(
        decode(&frame_of(short)),
        Err(FrameError::Malformed(_))
    ));
}
