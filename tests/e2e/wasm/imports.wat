;; imports.wat: imports that reach strata run's host functions, host_upper with another type, one missing (tests/e2e/wasm.sh).
(module
  (import "env" "host_add" (func $add (param i64 i64) (result i64)))
  (import "env" "host_upper" (func $add_bad (param i32) (result i32)))
  (import "env" "no_such_host_function" (func $missing (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "add") (param i64 i64) (result i64) local.get 0 local.get 1 call $add)
  (func (export "add_bad") (param i32) (result i32) local.get 0 call $add_bad)
  (func (export "missing") (param i32) (result i32) local.get 0 call $missing)
  (func (export "open") (result i32)
    i32.const 3 i32.const 0 i32.const 0 i32.const 0 i32.const 0 i64.const 0 i64.const 0 i32.const 0 i32.const 0
    call $path_open)
  (func (export "f64_out") (result f64) f64.const 1))
