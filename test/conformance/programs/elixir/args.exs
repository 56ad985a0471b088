Enum.each(System.argv(), &IO.puts/1)
