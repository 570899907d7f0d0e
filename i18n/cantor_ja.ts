<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="ja">
<context>
    <name>ComposePage</name>
    <message>
        <source>Queue</source>
        <translation>キュー</translation>
    </message>
    <message>
        <source>&amp;Caption</source>
        <translation>キャプション(&amp;C)</translation>
    </message>
    <message>
        <source>&amp;Lyrics</source>
        <translation>歌詞(&amp;L)</translation>
    </message>
    <message>
        <source>Instrumental</source>
        <translation>インストゥルメンタル</translation>
    </message>
    <message>
        <source>Inspire me</source>
        <translation>アイデアをもらう</translation>
    </message>
    <message>
        <source>Tidy my lyrics</source>
        <translation>歌詞を整える</translation>
    </message>
    <message>
        <source>Song</source>
        <translation>曲</translation>
    </message>
    <message>
        <source>auto (10–600 s)</source>
        <translation>自動 (10–600 秒)</translation>
    </message>
    <message>
        <source>auto (30–300)</source>
        <translation>自動 (30–300)</translation>
    </message>
    <message>
        <source>Key</source>
        <translation>キー</translation>
    </message>
    <message>
        <source>random</source>
        <translation>ランダム</translation>
    </message>
    <message>
        <source>Seed</source>
        <translation>シード</translation>
    </message>
    <message>
        <source>Lock</source>
        <translation>固定</translation>
    </message>
    <message>
        <source>Style</source>
        <translation>スタイル</translation>
    </message>
    <message>
        <source>Duration (s)</source>
        <translation>長さ (秒)</translation>
    </message>
    <message>
        <source>BPM</source>
        <translation>BPM</translation>
    </message>
    <message>
        <source>Time signature</source>
        <translation>拍子</translation>
    </message>
    <message>
        <source>Language</source>
        <translation>言語</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>モデル</translation>
    </message>
    <message>
        <source>Node</source>
        <translation>ノード</translation>
    </message>
    <message>
        <source>Format</source>
        <translation>形式</translation>
    </message>
    <message>
        <source>Takes</source>
        <translation>テイク数</translation>
    </message>
    <message>
        <source>Starting from</source>
        <translation>元にするもの</translation>
    </message>
    <message>
        <source>Faithful</source>
        <translation>忠実に</translation>
    </message>
    <message>
        <source>Generate</source>
        <translation>生成</translation>
    </message>
    <message>
        <source>Cover this file</source>
        <translation>このファイルをカバー</translation>
    </message>
</context>
<context>
    <name>ExportDialog</name>
    <message>
        <source>Folder</source>
        <translation>フォルダー</translation>
    </message>
</context>
<context>
    <name>ExtendDialog</name>
    <message>
        <source>Extend</source>
        <translation>延長</translation>
    </message>
    <message>
        <source>Leave empty to continue the music without new words</source>
        <translation>空のままにすると、新しい歌詞なしで音楽を続けます</translation>
    </message>
    <message>
        <source>Lyrics for the new part</source>
        <translation>新しいパートの歌詞</translation>
    </message>
    <message>
        <source>&amp;Lyrics for the new part</source>
        <translation>新しいパートの歌詞(&amp;L)</translation>
    </message>
    <message>
        <source> s</source>
        <translation> 秒</translation>
    </message>
    <message>
        <source>Seconds of the song the new part hears</source>
        <translation>新しいパートが聴く曲の秒数</translation>
    </message>
    <message>
        <source>The new part takes its voice and sound from this much of the song&apos;s end</source>
        <translation>新しいパートは曲の終わりのこの長さから声と音色を受け継ぎます</translation>
    </message>
    <message>
        <source>&amp;Hear the song&apos;s last</source>
        <translation>曲の最後を聴く(&amp;H)</translation>
    </message>
</context>
<context>
    <name>FoundModelsDialog</name>
    <message>
        <source>Models on this machine</source>
        <translation>このマシン上のモデル</translation>
    </message>
    <message>
        <source>ACE-Step model files other tools already downloaded: the Hugging Face cache (Lemonade, ComfyUI), acestep.cpp&apos;s models folder, and folders you add. Adopted files are checked and linked, never moved or changed.</source>
        <translation>他のツールがすでにダウンロードした ACE-Step のモデルファイル: Hugging Face のキャッシュ (Lemonade、ComfyUI)、acestep.cpp の models フォルダー、追加したフォルダー。取り込んだファイルは検証してリンクします。移動や変更はしません。</translation>
    </message>
    <message>
        <source>Model files found</source>
        <translation>見つかったモデルファイル</translation>
    </message>
    <message>
        <source>Copy files that cannot be linked (on another drive)</source>
        <translation>リンクできないファイル (別のドライブ上) をコピーする</translation>
    </message>
    <message>
        <source>A copy uses the file&apos;s size again on Cantor&apos;s drive</source>
        <translation>コピーすると Cantor のドライブでファイルと同じ容量をもう一度使います</translation>
    </message>
    <message>
        <source>Add a folder…</source>
        <translation>フォルダーを追加…</translation>
    </message>
    <message>
        <source>Look in another folder for .gguf model files</source>
        <translation>別のフォルダーで .gguf モデルファイルを探す</translation>
    </message>
    <message>
        <source>Adopt</source>
        <translation>取り込む</translation>
    </message>
    <message>
        <source>Check the picked files and add them to the library</source>
        <translation>選んだファイルを検証してライブラリに追加する</translation>
    </message>
    <message>
        <source>Looking…</source>
        <translation>検索中…</translation>
    </message>
    <message>
        <source>look for models</source>
        <translation>モデルを探す</translation>
    </message>
    <message>
        <source>A folder with .gguf files</source>
        <translation>.gguf ファイルのあるフォルダー</translation>
    </message>
    <message numerus="yes">
        <source>Checking %n file(s)…</source>
        <translation>
            <numerusform>%n 個のファイルを検証中…</numerusform>
        </translation>
    </message>
    <message>
        <source>adopt the files</source>
        <translation>ファイルを取り込む</translation>
    </message>
</context>
<context>
    <name>HardwarePage</name>
    <message>
        <source>Backends</source>
        <translation>バックエンド</translation>
    </message>
    <message>
        <source>What the backend search did</source>
        <translation>バックエンド検索の記録</translation>
    </message>
</context>
<context>
    <name>LibraryPage</name>
    <message>
        <source>Models</source>
        <translation>モデル</translation>
    </message>
    <message>
        <source>Hugging Face &amp;token</source>
        <translation>Hugging Face トークン(&amp;T)</translation>
    </message>
    <message>
        <source>Adapters</source>
        <translation>アダプター</translation>
    </message>
</context>
<context>
    <name>MainWindow</name>
    <message>
        <source>Compose</source>
        <translation>作曲</translation>
    </message>
    <message>
        <source>Songs</source>
        <translation>曲</translation>
    </message>
    <message>
        <source>Library</source>
        <translation>ライブラリ</translation>
    </message>
    <message>
        <source>Hardware &amp; Backends</source>
        <translation>ハードウェアとバックエンド</translation>
    </message>
    <message>
        <source>Settings</source>
        <translation>設定</translation>
    </message>
    <message>
        <source>Pages</source>
        <translation>ページ</translation>
    </message>
    <message>
        <source>Starting…</source>
        <translation>起動中…</translation>
    </message>
    <message>
        <source>Start node</source>
        <translation>ノードを起動</translation>
    </message>
    <message>
        <source>Node log</source>
        <translation>ノードのログ</translation>
    </message>
    <message>
        <source>Song ready: %1</source>
        <translation>曲ができました: %1</translation>
    </message>
    <message>
        <source>Song failed: %1</source>
        <translation>曲の生成に失敗しました: %1</translation>
    </message>
    <message>
        <source>Stop node</source>
        <translation>ノードを停止</translation>
    </message>
</context>
<context>
    <name>MenuBar</name>
    <message>
        <source>&amp;File</source>
        <translation>ファイル(&amp;F)</translation>
    </message>
    <message>
        <source>&amp;Edit</source>
        <translation>編集(&amp;E)</translation>
    </message>
    <message>
        <source>&amp;Song</source>
        <translation>曲(&amp;S)</translation>
    </message>
    <message>
        <source>&amp;Window</source>
        <translation>ウィンドウ(&amp;W)</translation>
    </message>
    <message>
        <source>&amp;Help</source>
        <translation>ヘルプ(&amp;H)</translation>
    </message>
    <message>
        <source>C&amp;ompose</source>
        <translation>作曲(&amp;O)</translation>
    </message>
    <message>
        <source>&amp;Songs</source>
        <translation>曲(&amp;S)</translation>
    </message>
    <message>
        <source>&amp;Library</source>
        <translation>ライブラリ(&amp;L)</translation>
    </message>
    <message>
        <source>&amp;Hardware &amp;&amp; Backends</source>
        <translation>ハードウェアとバックエンド(&amp;H)</translation>
    </message>
</context>
<context>
    <name>PoolPanel</name>
    <message>
        <source>Pool members</source>
        <translation>プールのメンバー</translation>
    </message>
</context>
<context>
    <name>SettingsPage</name>
    <message>
        <source>Node token</source>
        <translation>ノードのトークン</translation>
    </message>
</context>
<context>
    <name>SongQueue</name>
    <message>
        <source>Songs you generate show here while they are made.</source>
        <translation>生成中の曲はここに表示されます。</translation>
    </message>
    <message>
        <source>Song</source>
        <translation>曲</translation>
    </message>
    <message>
        <source>Stage</source>
        <translation>段階</translation>
    </message>
    <message>
        <source>Progress</source>
        <translation>進行状況</translation>
    </message>
    <message>
        <source>Time left</source>
        <translation>残り時間</translation>
    </message>
</context>
<context>
    <name>SongsPage</name>
    <message>
        <source>Search songs</source>
        <translation>曲を検索</translation>
    </message>
    <message>
        <source>★ Favourites</source>
        <translation>★ お気に入り</translation>
    </message>
    <message>
        <source>Songs and takes</source>
        <translation>曲とテイク</translation>
    </message>
    <message>
        <source>Repaint…</source>
        <translation>リペイント…</translation>
    </message>
    <message>
        <source>Extend</source>
        <translation>延長</translation>
    </message>
    <message>
        <source>Cover…</source>
        <translation>カバー…</translation>
    </message>
    <message>
        <source>Use as reference</source>
        <translation>リファレンスに使う</translation>
    </message>
    <message>
        <source>Add a layer…</source>
        <translation>レイヤーを追加…</translation>
    </message>
    <message>
        <source>Stems…</source>
        <translation>ステム…</translation>
    </message>
    <message>
        <source>Loop</source>
        <translation>ループ</translation>
    </message>
    <message>
        <source>Match levels</source>
        <translation>音量をそろえる</translation>
    </message>
    <message>
        <source>Play</source>
        <translation>再生</translation>
    </message>
    <message>
        <source>Play position</source>
        <translation>再生位置</translation>
    </message>
    <message>
        <source>Show in folder</source>
        <translation>フォルダーに表示</translation>
    </message>
    <message>
        <source>Copy path</source>
        <translation>パスをコピー</translation>
    </message>
    <message>
        <source>Use these settings</source>
        <translation>この設定を使う</translation>
    </message>
    <message>
        <source>Rename…</source>
        <translation>名前を変更…</translation>
    </message>
    <message>
        <source>Export…</source>
        <translation>書き出し…</translation>
    </message>
    <message>
        <source>Move to trash</source>
        <translation>ゴミ箱に移動</translation>
    </message>
    <message>
        <source>Loop: on</source>
        <translation>ループ: オン</translation>
    </message>
    <message>
        <source>Pause</source>
        <translation>一時停止</translation>
    </message>
</context>
<context>
    <name>StylePicker</name>
    <message>
        <source>Style</source>
        <translation>スタイル</translation>
    </message>
    <message>
        <source>Fill the form from a saved style (still editable)</source>
        <translation>保存したスタイルでフォームを埋める (あとで編集できます)</translation>
    </message>
    <message>
        <source>Styles</source>
        <translation>スタイル</translation>
    </message>
    <message>
        <source>Style actions</source>
        <translation>スタイルの操作</translation>
    </message>
    <message>
        <source>Save the form as a style…</source>
        <translation>フォームをスタイルとして保存…</translation>
    </message>
    <message>
        <source>Rename this style…</source>
        <translation>このスタイルの名前を変更…</translation>
    </message>
    <message>
        <source>Remove this style</source>
        <translation>このスタイルを削除</translation>
    </message>
    <message>
        <source>Export this style…</source>
        <translation>このスタイルを書き出す…</translation>
    </message>
    <message>
        <source>Import a style…</source>
        <translation>スタイルを読み込む…</translation>
    </message>
    <message>
        <source>Save as a style</source>
        <translation>スタイルとして保存</translation>
    </message>
    <message>
        <source>Style name:</source>
        <translation>スタイル名:</translation>
    </message>
    <message>
        <source>Replace the style?</source>
        <translation>スタイルを置き換えますか?</translation>
    </message>
    <message>
        <source>A style named %1 exists. Replace it with the form?</source>
        <translation>%1 という名前のスタイルがあります。フォームの内容で置き換えますか?</translation>
    </message>
    <message>
        <source>Rename the style</source>
        <translation>スタイルの名前を変更</translation>
    </message>
    <message>
        <source>New name:</source>
        <translation>新しい名前:</translation>
    </message>
    <message>
        <source>Remove the style?</source>
        <translation>スタイルを削除しますか?</translation>
    </message>
    <message>
        <source>Remove the style %1 and its reference sound? Songs made with it stay.</source>
        <translation>スタイル %1 とそのリファレンス音を削除しますか? このスタイルで作った曲は残ります。</translation>
    </message>
    <message>
        <source>Export the style</source>
        <translation>スタイルを書き出す</translation>
    </message>
    <message>
        <source>Import a style</source>
        <translation>スタイルを読み込む</translation>
    </message>
</context>
<context>
    <name>WaveformEditor</name>
    <message>
        <source>Waveform</source>
        <translation>波形</translation>
    </message>
    <message>
        <source>Drag across the waveform to select a part to repaint; drag past either end to extend the song there. Keys: arrows move the cursor (Ctrl: a tenth of a second), I and O set the in and out points, Shift+arrows select, Esc clears</source>
        <translation>波形の上をドラッグしてリペイントする部分を選び、端の外までドラッグするとそこで曲を延長します。キー: 矢印でカーソル移動 (Ctrl: 0.1 秒)、I と O でイン点とアウト点、Shift+矢印で選択、Esc で解除</translation>
    </message>
    <message>
        <source>Drag across the waveform (or press I and O) to select a part to repaint, or past an end to extend</source>
        <translation>波形の上をドラッグする (または I と O を押す) とリペイントする部分を選べます。端の外までドラッグすると延長します</translation>
    </message>
</context>
</TS>
