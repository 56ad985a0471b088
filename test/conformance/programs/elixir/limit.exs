defmodule L do
  def loop(n), do: loop(n + 1)
end
L.loop(0)
