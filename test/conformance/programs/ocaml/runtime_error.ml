let () = failwith "boom"
