:ok = :io.setopts(:standard_io, [:binary, encoding: :latin1])
IO.binstream(:stdio, 65536) |> Enum.each(&IO.binwrite/1)
