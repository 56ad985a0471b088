File.write("output.txt", File.read("input.txt").upcase)
