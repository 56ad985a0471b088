let () =
  let ic = open_in_bin "input.txt" in
  let s = really_input_string ic (in_channel_length ic) in
  close_in ic;
  let oc = open_out_bin "output.txt" in
  output_string oc (String.uppercase_ascii s);
  close_out oc
