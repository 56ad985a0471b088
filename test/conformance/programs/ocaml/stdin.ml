let () =
  set_binary_mode_in stdin true;
  let buf = Bytes.create 65536 in
  let rec loop () =
    let n = input stdin buf 0 65536 in
    if n > 0 then (output stdout buf 0 n; loop ())
  in
  loop ()
