with Ada.Text_IO;
procedure Main is
   X : Integer := "not an integer";
begin
   Ada.Text_IO.Put_Line (Integer'Image (X))
end Main;
