procedure Main is
   type Block is array (1 .. 1_048_576) of Character;
   type Block_Access is access Block;
   B : Block_Access;
begin
   loop
      B := new Block;
      for I in 1 .. 256 loop
         B (I * 4096) := 'x';
      end loop;
   end loop;
end Main;
