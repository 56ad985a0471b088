with Ada.Text_IO;
procedure Main is
begin
   Ada.Text_IO.Put_Line ("héllo wörld ✓ 日本");
end Main;
