;; The vector pass of json-bytes.ts's control-byte check: whether a chunk holds a byte below 0x20. The smallest byte
;; of each lane is kept across the chunk (four 16-byte loads per step), and compared with 0x20 once at the end.
;;
;; Memory layout (filled by json-bytes.ts): the chunk from 0, then at least 64 bytes of 0xff, which lower no minimum.
;;
;; Built into control-bytes-wasm.ts by scripts/build-wasm.mjs; a test checks that file against this one.
(module
  (memory (export "memory") 5)
  ;; 1 when some byte of [0, end) is below 0x20, else 0.
  (func (export "below") (param $end i32) (result i32)
    (local $at i32) (local $low v128)
    (local.set $low (i8x16.splat (i32.const 255)))
    (block $done
      (loop $blocks
        (br_if $done (i32.ge_u (local.get $at) (local.get $end)))
        (local.set $low
          (i8x16.min_u (local.get $low)
            (i8x16.min_u
              (i8x16.min_u (v128.load offset=0 align=1 (local.get $at)) (v128.load offset=16 align=1 (local.get $at)))
              (i8x16.min_u (v128.load offset=32 align=1 (local.get $at)) (v128.load offset=48 align=1 (local.get $at))))))
        (local.set $at (i32.add (local.get $at) (i32.const 64)))
        (br $blocks)))
    (i32.eqz (i8x16.all_true (i8x16.ge_u (local.get $low) (i8x16.splat (i32.const 32)))))))
