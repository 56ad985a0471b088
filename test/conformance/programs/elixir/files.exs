File.write!("output.txt", String.upcase(File.read!("input.txt")))
