/// Languages as manifests write them: BCP 47 tags (`fr`, `fr-FR`) whose primary subtag may be
/// ISO 639-1 (`fr`) or ISO 639-2 in its terminology (`fra`) or bibliographic (`fre`) form, as
/// DASH packagers such as ffmpeg write `lang`. A request for a language finds it in any form.
enum LanguageCodes {
    /// Whether `tag` (a manifest's language) is one of `wanted` (the app's): the primary subtags
    /// name the same language in any of the three forms, and the wanted tag's further subtags
    /// (a region, a script) are the first of the tag's (`fr` takes `fr-CA`; `fr-CA` does not
    /// take `fr`). Case is ignored.
    static func matches(_ tag: String, anyOf wanted: [String]) -> Bool {
        let subtags = canonical(tag)
        return wanted.contains { wanted in
            let wantedSubtags = canonical(wanted)
            return !wantedSubtags.isEmpty && subtags.starts(with: wantedSubtags)
        }
    }

    /// The tag's subtags, lowercase, the primary one in its two-letter form when it has one.
    static func canonical(_ tag: String) -> [Substring] {
        var subtags = tag.lowercased().split(whereSeparator: { $0 == "-" || $0 == "_" })
        if let primary = subtags.first, primary.count == 3, let short = twoLetter[String(primary)] { subtags[0] = Substring(short) }
        return subtags
    }

    /// ISO 639-2 codes (terminology and bibliographic) by their ISO 639-1 code.
    private static let twoLetter: [String: String] = {
        var codes: [String: String] = [:]
        for entry in table.split(whereSeparator: \.isWhitespace) {
            let parts = entry.split(separator: ":")
            for long in parts[1].split(separator: "/") { codes[String(long)] = String(parts[0]) }
        }
        return codes
    }()

    /// ISO 639-1 code, then its ISO 639-2/T code and, where it differs, the /B one. From Debian's
    /// iso-codes (`/usr/share/iso-codes/json/iso_639-2.json`): every language with a two-letter code.
    private static let table = """
        aa:aar ab:abk af:afr ak:aka am:amh ar:ara an:arg as:asm av:ava ae:ave ay:aym az:aze ba:bak bm:bam
        be:bel bn:ben bh:bih bi:bis bo:bod/tib bs:bos br:bre bg:bul ca:cat cs:ces/cze ch:cha ce:che cu:chu
        cv:chv kw:cor co:cos cr:cre cy:cym/wel da:dan de:deu/ger dv:div dz:dzo el:ell/gre en:eng eo:epo
        et:est eu:eus/baq ee:ewe fo:fao fa:fas/per fj:fij fi:fin fr:fra/fre fy:fry ff:ful gd:gla ga:gle
        gl:glg gv:glv gn:grn gu:guj ht:hat ha:hau he:heb hz:her hi:hin ho:hmo hr:hrv hu:hun hy:hye/arm
        ig:ibo io:ido ii:iii iu:iku ie:ile ia:ina id:ind ik:ipk is:isl/ice it:ita jv:jav ja:jpn kl:kal
        kn:kan ks:kas ka:kat/geo kr:kau kk:kaz km:khm ki:kik rw:kin ky:kir kv:kom kg:kon ko:kor kj:kua
        ku:kur lo:lao la:lat lv:lav li:lim ln:lin lt:lit lb:ltz lu:lub lg:lug mh:mah ml:mal mr:mar
        mk:mkd/mac mg:mlg mt:mlt mn:mon mi:mri/mao ms:msa/may my:mya/bur na:nau nv:nav nr:nbl nd:nde ng:ndo
        ne:nep nl:nld/dut nn:nno nb:nob no:nor ny:nya oc:oci oj:oji or:ori om:orm os:oss pa:pan pi:pli
        pl:pol pt:por ps:pus qu:que rm:roh ro:ron/rum rn:run ru:rus sg:sag sa:san si:sin sk:slk/slo sl:slv
        se:sme sm:smo sn:sna sd:snd so:som st:sot es:spa sq:sqi/alb sc:srd sr:srp ss:ssw su:sun sw:swa
        sv:swe ty:tah ta:tam tt:tat te:tel tg:tgk tl:tgl th:tha ti:tir to:ton tn:tsn ts:tso tk:tuk tr:tur
        tw:twi ug:uig uk:ukr ur:urd uz:uzb ve:ven vi:vie vo:vol wa:wln wo:wol xh:xho yi:yid yo:yor za:zha
        zh:zho/chi zu:zul
        """
}
